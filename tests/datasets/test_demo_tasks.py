"""The bundled demo dataset: every task is well formed and its bug is real.

The docker tests build each task's case image and, in plain containers of it
(no SSEBench runtime), run the task's scripts the way the evaluator does: as an
unprivileged user with no home, on a fresh copy of the source tree per check,
with no network. They prove what the reference and dummy agents rely on:

- unmodified: the project builds and passes its own tests, every PoC triggers
  (`run.sh` exits non-zero) and the hidden tests fail;
- with the reference fix: it builds, no PoC triggers, and its own and the
  hidden tests pass.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
import yaml

from ssebench.spec import (
    ImageUnavailableError,
    TaskConfig,
    find_task,
    load_dataset,
    load_task_config,
)

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "demo"
TASK_FOLDERS = sorted(p for p in DATASET.iterdir() if (p / "sse" / "config.yaml").is_file())
TASK_IDS = [folder.name for folder in TASK_FOLDERS]
CHECKS = ("build", "poc", "function_test", "intent_test")
SCENARIO_TIMEOUT = 600
RESULT = re.compile(r"^SSE-RESULT (\S+)=(-?\d+)$", re.MULTILINE)


def read_config(folder: Path) -> TaskConfig:
    return load_task_config(folder / "sse" / "config.yaml")


def task_file(folder: Path, path: str) -> Path:
    """Where a path relative to /ssebench comes from in the task folder (§2a)."""
    if path == "config.yaml":
        return folder / "sse" / "config.yaml"
    top, _, rest = path.partition("/")
    if top == "scripts":
        return folder / "sse" / rest
    return folder / "sse" / path


# --- the task folders, without an engine -------------------------------------------------


def test_the_demo_dataset_has_tasks_in_at_least_two_languages():
    languages = {read_config(folder).language for folder in TASK_FOLDERS}
    assert len(TASK_FOLDERS) >= 2
    assert len(languages) >= 2, languages


def test_dataset_yaml_names_version_1_and_only_known_keys():
    meta = yaml.safe_load((DATASET / "dataset.yaml").read_text())
    assert meta["version"] == "1"
    assert set(meta) <= {"version", "name", "description"}


def test_every_task_config_loads_with_all_four_checks():
    tasks = load_dataset(DATASET)
    assert [task.id for task in tasks] == TASK_IDS
    for task in tasks:
        assert task.dataset == "demo"
        assert task.dataset_version == "1"
        assert task.config.checks() == CHECKS, task.id


@pytest.mark.parametrize("folder", TASK_FOLDERS, ids=TASK_IDS)
def test_a_task_config_names_its_folder(folder):
    assert read_config(folder).id == folder.name


@pytest.mark.parametrize("folder", TASK_FOLDERS, ids=TASK_IDS)
def test_every_path_a_task_config_names_exists_in_the_task_folder(folder):
    config = read_config(folder)
    files = config.files
    scripts = [s for s in (config.scripts.build, config.scripts.run, config.scripts.test) if s]
    paths = [
        *scripts,
        files.patch,
        files.future_test,
        *files.poc,
        *config.task_description.crash_report,
    ]
    for path in paths:
        assert not path.startswith("/"), path
        assert task_file(folder, path).is_file(), f"{folder.name}: {path} is missing"
    for script in scripts:
        assert os.access(task_file(folder, script), os.X_OK), f"{script} is not executable"


@pytest.mark.parametrize("folder", TASK_FOLDERS, ids=TASK_IDS)
def test_a_task_dockerfile_starts_from_the_configured_base_image(folder):
    lines = [
        line.strip()
        for line in (folder / "Dockerfile").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines[:2] == ["ARG SSEBENCH_BASE_IMAGE", "FROM ${SSEBENCH_BASE_IMAGE}"]
    assert "ARG SSEBENCH_REGISTRY" in lines
    text = "\n".join(lines)
    assert "--mount" not in text and "--chmod" not in text  # the classic builder only


# --- the bugs, in containers of the case images -----------------------------------------


@dataclass(frozen=True)
class CaseImage:
    task_id: str
    tag: str
    source: str
    pocs: tuple[str, ...]


@dataclass(frozen=True)
class Scenario:
    """The exit codes one container reported, and its output for failure messages."""

    name: str
    codes: dict[str, int]
    log: str

    def code(self, key: str) -> int:
        assert key in self.codes, f"{self.name}: no result for {key!r}\n{self.tail()}"
        return self.codes[key]

    def tail(self, lines: int = 80) -> str:
        return "--- container output (tail) ---\n" + "\n".join(self.log.splitlines()[-lines:])


@pytest.fixture(scope="module", params=TASK_IDS)
def case_image(
    request: pytest.FixtureRequest, docker_client: docker.DockerClient, base_image: str
) -> CaseImage:
    """The task's case image, built by the runner's own builder (`build_case`)."""
    from ssebench.backends.docker import build_case

    task = find_task(DATASET, request.param)
    try:
        image = build_case(docker_client, task)
    except ImageUnavailableError as exc:
        pytest.fail(f"building the case image of {task.id} failed: {exc}")
    return CaseImage(
        task_id=task.id,
        tag=image.tag,
        source=task.config.source,
        pocs=tuple(task.config.files.poc),
    )


SCENARIO_SCRIPT = r"""
set -u
SRC={source}
FIX={fix}
POCS=({pocs})
say() {{ echo "SSE-RESULT $1=$2"; }}

# sse-runner as the tool layer makes it: a system user, own group, no home.
useradd --system --user-group --no-create-home --home-dir /nonexistent \
  --shell /usr/sbin/nologin sse-runner || exit 90

# fresh [diff...]: a new copy of the tree in /tmp/work, with the reference fix
# (in the fixed scenario) and the given diffs applied, owned by sse-runner.
fresh() {{
  rm -rf /tmp/work && cp -a "$SRC" /tmp/work || return 1
  local diffs=()
  if [ "$FIX" = 1 ]; then diffs+=(/ssebench/diffs/patch.diff); fi
  diffs+=("$@")
  local d
  for d in "${{diffs[@]}}"; do
    (cd /tmp/work && git apply -p1 "$d") || return 1
  done
  chown -R sse-runner:sse-runner /tmp/work
}}

# as_runner CMD...: run in /tmp/work as sse-runner with a bare environment (no HOME).
as_runner() {{
  (cd /tmp/work && setpriv --reuid=sse-runner --regid=sse-runner --clear-groups \
    env -i PATH=/usr/local/bin:/usr/bin:/bin "$@")
}}

echo "=== build"
fresh; say build_setup $?
as_runner bash /ssebench/scripts/build.sh; say build $?

echo "=== poc"
fresh; say poc_setup $?
as_runner bash /ssebench/scripts/build.sh; say poc_build $?
for poc in "${{POCS[@]}}"; do
  echo "--- $poc"
  as_runner bash /ssebench/scripts/run.sh "/ssebench/$poc"; say "poc:$poc" $?
done

echo "=== function_test"
fresh; say function_test_setup $?
as_runner bash /ssebench/scripts/test.sh; say function_test $?

echo "=== intent_test"
fresh /ssebench/diffs/test.diff; say intent_test_setup $?
as_runner bash /ssebench/scripts/test.sh; say intent_test $?

echo "=== files sse-runner left outside its working copy"
rm -rf /tmp/work
stray=$(find / -xdev -user sse-runner 2>/dev/null | wc -l)
find / -xdev -user sse-runner 2>/dev/null | head -20
say stray_files "$stray"
"""


def run_scenario(client: docker.DockerClient, image: CaseImage, *, fix: bool) -> Scenario:
    script = SCENARIO_SCRIPT.format(
        source=shlex.quote(image.source),
        fix=int(fix),
        pocs=" ".join(shlex.quote(poc) for poc in image.pocs),
    )
    name = f"{image.task_id} ({'reference fix' if fix else 'unmodified'})"
    container = client.containers.run(
        image.tag,
        ["bash", "-c", script],
        user="0",
        network_disabled=True,
        detach=True,
        labels={"ssebench.test": "demo-tasks"},
    )
    try:
        status = container.wait(timeout=SCENARIO_TIMEOUT)
        log = container.logs(stdout=True, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    codes = {key: int(value) for key, value in RESULT.findall(log)}
    scenario = Scenario(name=name, codes=codes, log=log)
    assert status["StatusCode"] == 0, f"{name}: scenario script failed\n{scenario.tail()}"
    return scenario


@pytest.fixture(scope="module")
def unmodified(docker_client: docker.DockerClient, case_image: CaseImage) -> Iterator[Scenario]:
    yield run_scenario(docker_client, case_image, fix=False)


@pytest.fixture(scope="module")
def fixed(docker_client: docker.DockerClient, case_image: CaseImage) -> Iterator[Scenario]:
    yield run_scenario(docker_client, case_image, fix=True)


def assert_setup(scenario: Scenario, check: str) -> None:
    assert scenario.code(f"{check}_setup") == 0, (
        f"{scenario.name}: preparing the copy for {check} failed "
        f"(cp, or git apply of patch.diff / test.diff)\n{scenario.tail()}"
    )


@pytest.mark.docker
def test_the_unmodified_project_builds(unmodified):
    assert_setup(unmodified, "build")
    assert unmodified.code("build") == 0, f"build: build.sh failed\n{unmodified.tail()}"


@pytest.mark.docker
def test_every_poc_triggers_on_the_unmodified_project(unmodified, case_image):
    assert_setup(unmodified, "poc")
    assert unmodified.code("poc_build") == 0, f"poc: build.sh failed\n{unmodified.tail()}"
    for poc in case_image.pocs:
        assert unmodified.code(f"poc:{poc}") != 0, (
            f"poc: {poc} does not trigger (run.sh exited 0) on the unmodified project\n"
            f"{unmodified.tail()}"
        )


@pytest.mark.docker
def test_the_unmodified_project_passes_its_own_tests(unmodified):
    assert_setup(unmodified, "function_test")
    assert unmodified.code("function_test") == 0, (
        f"function_test: test.sh failed on the unmodified project\n{unmodified.tail()}"
    )


@pytest.mark.docker
def test_the_hidden_tests_fail_on_the_unmodified_project(unmodified):
    assert_setup(unmodified, "intent_test")
    assert unmodified.code("intent_test") != 0, (
        f"intent_test: the hidden tests pass without the fix\n{unmodified.tail()}"
    )


@pytest.mark.docker
def test_the_fixed_project_builds(fixed):
    assert_setup(fixed, "build")
    assert fixed.code("build") == 0, f"build: build.sh failed\n{fixed.tail()}"


@pytest.mark.docker
def test_no_poc_triggers_once_the_reference_fix_is_applied(fixed, case_image):
    assert_setup(fixed, "poc")
    assert fixed.code("poc_build") == 0, f"poc: build.sh failed\n{fixed.tail()}"
    for poc in case_image.pocs:
        assert fixed.code(f"poc:{poc}") == 0, (
            f"poc: {poc} still triggers with the reference fix (run.sh exited "
            f"{fixed.code(f'poc:{poc}')})\n{fixed.tail()}"
        )


@pytest.mark.docker
def test_the_fixed_project_passes_its_own_tests(fixed):
    assert_setup(fixed, "function_test")
    assert fixed.code("function_test") == 0, (
        f"function_test: test.sh failed with the reference fix\n{fixed.tail()}"
    )


@pytest.mark.docker
def test_the_fixed_project_passes_the_hidden_tests(fixed):
    assert_setup(fixed, "intent_test")
    assert fixed.code("intent_test") == 0, (
        f"intent_test: the hidden tests fail with the reference fix\n{fixed.tail()}"
    )


@pytest.mark.docker
def test_task_scripts_write_nothing_outside_their_working_copy(unmodified, fixed):
    for scenario in (unmodified, fixed):
        assert scenario.code("stray_files") == 0, (
            f"{scenario.name}: sse-runner left files outside its working copy\n{scenario.tail()}"
        )


@pytest.mark.docker
def test_under_another_registry_prefix_the_case_image_comes_whole_from_the_cache(
    case_image: CaseImage, docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `images push`, a catalog's pull and the k8s backend build under a registry's prefix:
    # the runner passes it as SSEBENCH_REGISTRY, which must not rebuild the toolchain's
    # layers (and every tool, sidecar and agent layer on top of them) once more.
    from ssebench.backends.docker import build_case

    monkeypatch.setenv("SSEBENCH_REGISTRY", "ssebench-test-another-prefix")
    other = build_case(docker_client, find_task(DATASET, case_image.task_id))
    try:
        # Only the build's labels (the prefix is one of them) are new: no line ran again.
        # (Not the layers against the local tag's: a parallel test may rebuild that.)
        ran = [step.instruction for step in other.rebuilt]
        assert all(line.startswith("LABEL ") for line in ran), ran
        assert other.steps, "the build reported no steps"
    finally:
        docker_client.api.remove_image(other.tag)  # the tag only: the image is the other's
