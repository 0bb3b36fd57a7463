"""The example extension's tool layer `callers` (tests/fixtures/ssebench-example-ext).

Found through its `ssebench.tool_layers` entry point, it passes the tool layer
contract's checks of ssebench-conformance on every demo task, its extra tool
works for the agent's user, `ssebench run --tool-layer callers` runs the
reference agent to a pass on it, and `ssebench tool-layers check` says so too.
The checks can fail: a layer that opens the task folder, leaves a world-writable
file or swaps the entrypoint fails the checks naming each, and a layer not built
on the case image is refused by the builder.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import docker
import pytest
from ssebench_example_ext import callers_tool_layer
from typer.testing import CliRunner

from ssebench.backends.docker import build_tool_images, case_image_name
from ssebench.backends.docker._build import no_progress
from ssebench.backends.docker._tool_layers import build_extension_tool_layer
from ssebench.backends.docker.tool_layer_commands import tool_layers_app
from ssebench.conformance import (
    ToolLayerSubject,
    docker_subject,
    run_tool_layer_checks,
    tool_layer_tests,
)
from ssebench.spec import (
    TOOL_LAYERS_GROUP,
    ImageUnavailableError,
    Task,
    ToolLayer,
    default_dataset,
    find_task,
    load_dataset,
    registry,
    runtime_version,
)

pytestmark = pytest.mark.docker

HOME = Path(__file__).resolve().parents[2]
DEMO = default_dataset(HOME)
TASKS = [task.id for task in load_dataset(DEMO)]


def build(client: docker.DockerClient, task: Task, layer: ToolLayer) -> str:
    sandbox = build_tool_images(client, [task], HOME)[-1]
    built = build_extension_tool_layer(client, task, layer, sandbox, progress=no_progress)
    return built.tag


@pytest.fixture(scope="module")
def callers() -> ToolLayer:
    return callers_tool_layer()


@pytest.fixture(scope="module")
def callers_subject(
    docker_client: docker.DockerClient, runtime_image: str, callers: ToolLayer
) -> Callable[[str], ToolLayerSubject]:
    """`callers_subject(task_id)`: the example layer built for a demo task, once per module."""
    made: dict[str, ToolLayerSubject] = {}

    def subject(task_id: str) -> ToolLayerSubject:
        if task_id not in made:
            task = find_task(DEMO, task_id)
            image = build(docker_client, task, callers)
            made[task_id] = docker_subject(image, task.config, docker_client)
        return made[task_id]

    return subject


@pytest.fixture(scope="module", params=TASKS)
def tool_layer_subject(
    request: pytest.FixtureRequest, callers_subject: Callable[[str], ToolLayerSubject]
) -> ToolLayerSubject:
    return callers_subject(request.param)


test_the_example_tool_layer_keeps_the_contract = tool_layer_tests()


def test_the_tool_layer_comes_from_the_extensions_own_distribution(callers: ToolLayer) -> None:
    from ssebench.spec import get_tool_layer

    (entry,) = [e for e in metadata.entry_points(group=TOOL_LAYERS_GROUP) if e.name == "callers"]
    assert entry.dist is not None
    assert entry.dist.metadata["Name"] == "ssebench-example-ext"
    assert get_tool_layer("callers") == callers


def test_its_extra_tool_works_for_the_agents_user(
    callers_subject: Callable[[str], ToolLayerSubject],
) -> None:
    subject = callers_subject("tlvkit-heap-overflow")
    ran = subject.run(["callers", "tlv_read_item"], user="model", workdir=subject.config.source)
    lines = ran.ok().splitlines()
    assert any(line.startswith("tlv.c:") for line in lines), lines
    assert all("tlv_read_item" in line for line in lines)


HOSTILE = """\
ARG SANDBOX_IMAGE
FROM ${SANDBOX_IMAGE}
RUN ["/opt/ssebench/bin/python3.11", "-I", "-c", "import os; os.chmod('/ssebench', 0o755); \\
open('/etc/shared-notes', 'w').close(); os.chmod('/etc/shared-notes', 0o666)"]
ENTRYPOINT ["/bin/bash"]
"""

ELSEWHERE = """\
ARG RUNTIME_IMAGE
FROM ${RUNTIME_IMAGE}
"""


def test_a_layer_that_breaks_the_contract_fails_the_checks_that_say_how(
    docker_client: docker.DockerClient, runtime_image: str, tmp_path: Path
) -> None:
    (tmp_path / "Dockerfile").write_text(HOSTILE)
    task = find_task(DEMO, "tlvkit-heap-overflow")
    layer = ToolLayer(name="hostile", context=str(tmp_path))
    image = build(docker_client, task, layer)
    try:
        report = run_tool_layer_checks(docker_subject(image, task.config, docker_client))
    finally:
        docker_client.images.remove(image, force=True)

    failed = {outcome.check for outcome in report.outcomes if outcome.status == "failed"}
    assert not report.ok
    assert failed == {
        "its_entrypoint_is_ssebenchs_and_it_starts_as_root",
        "every_path_of_the_contract_has_its_owner_and_mode",
        "under_ssebench_everything_is_roots_alone",
        "neither_the_agent_nor_sse_runner_can_read_anything_of_the_task_folder",
        "nothing_is_world_writable_outside_sticky_folders",
    }, str(report)
    details = {outcome.check: outcome.detail for outcome in report.outcomes}
    assert "/etc/shared-notes" in details["nothing_is_world_writable_outside_sticky_folders"]
    assert (
        "'/ssebench': ['root', 'root', '0o755']"
        in (details["every_path_of_the_contract_has_its_owner_and_mode"])
    )
    assert (
        "ENTRYPOINT is ['/bin/bash']"
        in details["its_entrypoint_is_ssebenchs_and_it_starts_as_root"]
    )


def test_a_layer_not_built_on_the_case_image_is_refused_and_untagged(
    docker_client: docker.DockerClient, runtime_image: str, tmp_path: Path
) -> None:
    (tmp_path / "Dockerfile").write_text(ELSEWHERE)
    task = find_task(DEMO, "tlvkit-heap-overflow")
    layer = ToolLayer(name="elsewhere", context=str(tmp_path))

    with pytest.raises(ImageUnavailableError) as caught:
        build(docker_client, task, layer)

    assert str(caught.value) == (
        "tool layer 'elsewhere' is not built on the case image of tlvkit-heap-overflow: its "
        "Dockerfile must start FROM ${SANDBOX_IMAGE} or ${CASE_IMAGE}"
    )
    tag = f"{registry()}/tool-elsewhere/tlvkit-heap-overflow:{runtime_version()}"
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(tag)
    assert docker_client.images.get(case_image_name(task))


def test_ssebench_tool_layers_check_fails_a_hostile_layer_from_another_package(
    docker_client: docker.DockerClient,
    runtime_image: str,
    tmp_path: Path,
    install_distribution: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(HOSTILE)
    install_distribution(
        name="hostile-layer",
        entry_points={TOOL_LAYERS_GROUP: {"hostile": "hostile_layer:layer"}},
        modules={
            "hostile_layer.py": "from ssebench.extensions import ToolLayer\n"
            f"def layer():\n    return ToolLayer(name='hostile', context={str(context)!r})\n"
        },
    )
    monkeypatch.setenv("SSEBENCH_HOME", str(HOME))
    tag = f"{registry()}/tool-hostile/tlvkit-heap-overflow:{runtime_version()}"
    try:
        done = CliRunner().invoke(
            tool_layers_app, ["check", "hostile", "--tasks", "tlvkit-heap-overflow", "--json"]
        )
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(tag, force=True)

    assert done.exit_code == 1, done.output
    failed = {o["check"] for o in json.loads(done.stdout) if o["status"] == "failed"}
    assert "nothing_is_world_writable_outside_sticky_folders" in failed
    assert len(failed) == 5


def ssebench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("ssebench")
    argv = [str(script if script.exists() else shutil.which("ssebench") or "ssebench")]
    env = {**os.environ, "SSEBENCH_HOME": str(HOME)}
    env.pop("SSEBENCH_PREBUILT", None)
    return subprocess.run(
        [*argv, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=2000, check=False
    )


def test_ssebench_tool_layers_check_passes_the_example_layer(
    runtime_image: str, tmp_path: Path
) -> None:
    done = ssebench(
        "tool-layers", "check", "callers", "--tasks", "tlvkit-heap-overflow", "--json",
        cwd=tmp_path,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    outcomes: list[dict[str, Any]] = json.loads(done.stdout)
    assert len(outcomes) == 11
    assert {outcome["status"] for outcome in outcomes} == {"passed"}
    assert {outcome["task"] for outcome in outcomes} == {"tlvkit-heap-overflow"}


@pytest.mark.timeout(2400)
def test_the_reference_agent_passes_on_the_example_tool_layer(
    docker_client: docker.DockerClient, base_image: str, tmp_path: Path
) -> None:
    run_id = f"callers-{secrets.token_hex(3)}"

    done = ssebench(
        "run", "--tool-layer", "callers", "--task", "tlvkit-heap-overflow",
        "--agent", "reference", "--run-id", run_id, "--difficulty", "1", "--json",
        cwd=tmp_path,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["patch_result"]["status"] == "passed"
    assert summary["config"]["tool_layer"] == "callers"
    assert "tool-callers: " in done.stderr, "the layer was built (or found up to date)"
    # The agent's image is built on the layer: the extra tool is there.
    agent_image = f"{registry()}/agent-reference/tlvkit-heap-overflow:"
    (image,) = [
        tag for image in docker_client.images.list() for tag in image.tags
        if tag.startswith(agent_image)
    ]  # fmt: skip
    listed = docker_client.containers.run(
        image, ["-I", "-c", "import os; print(os.access('/usr/local/bin/callers', os.X_OK))"],
        entrypoint=["/opt/ssebench/bin/python3.11"], remove=True, network_disabled=True,
    )  # fmt: skip
    assert listed.decode().strip() == "True"
