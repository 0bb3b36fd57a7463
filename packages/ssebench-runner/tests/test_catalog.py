"""`ssebench run --task ID` from a task catalog, and `ssebench dataset publish` with no registry."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from ssebench.conformance.fake import FakeBackend
from ssebench.spec import ImageRequest, load_dataset
from ssebench.spec.catalog import (
    LOCK_FILE,
    MANIFEST_FILE,
    files_digest,
    manifest_of,
    write_catalog,
)

from .conftest import TASK_ID, run_args, write_task

Cli = Callable[..., Result]

DIGEST = "sha256:" + "ab" * 32
REGISTRY = "127.0.0.1:5999/ssebench-unit"


def publish(dataset: Path, lock: dict[str, str] | None = None) -> Path:
    """Write the dataset's manifest (and lock) as `dataset publish` does."""
    found = load_dataset(dataset)
    manifest = manifest_of(found[0].dataset, found[0].dataset_version, None, found)
    return write_catalog(dataset, manifest, lock)[0]


@pytest.fixture
def catalog(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The home's demo dataset published as the default catalog, no registry configured."""
    monkeypatch.delenv("SSEBENCH_CATALOG", raising=False)
    monkeypatch.setenv("SSEBENCH_REGISTRY", "ssebench-unit")
    return publish(home / "datasets" / "demo")


def request_of(fake: FakeBackend) -> ImageRequest:
    call = fake.calls[0]
    assert call.method == "prepare_images"
    request = call.args[0]
    assert isinstance(request, ImageRequest)
    return request


def refused(outcome: Result, fake: FakeBackend) -> str:
    """The one line a refused run printed, after checking it changed nothing."""
    assert outcome.exit_code == 1, outcome.stdout + outcome.stderr
    assert outcome.stdout == ""
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    assert fake.methods == []
    assert not Path("results").exists()
    return lines[0].removeprefix("ssebench: ")


def test_without_local_the_task_comes_from_the_demo_manifest_and_nothing_is_pulled(
    catalog: Path, fake: FakeBackend, cli: Cli
) -> None:
    outcome = cli(*run_args())

    assert outcome.exit_code == 0, outcome.stderr
    case = request_of(fake).case
    assert case is not None
    assert case.catalog == str(catalog)
    assert case.pull is None  # no registry host configured: built from the matching folder
    entry = json.loads(catalog.read_text())["tasks"][0]
    assert case.files == entry["files"]
    assert request_of(fake).task.folder == str(catalog.parent / TASK_ID)


def test_with_a_registry_the_case_image_is_pulled_by_the_locks_digest(
    catalog: Path, fake: FakeBackend, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(catalog.parent, {f"case/demo/{TASK_ID}:1": DIGEST})
    monkeypatch.setenv("SSEBENCH_REGISTRY", REGISTRY)

    assert cli(*run_args()).exit_code == 0

    case = request_of(fake).case
    assert case is not None
    assert case.pull == f"{REGISTRY}/case/demo/{TASK_ID}@{DIGEST}"


def test_without_a_lock_the_case_image_is_pulled_by_the_datasets_version_tag(
    catalog: Path, fake: FakeBackend, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSEBENCH_REGISTRY", REGISTRY)

    assert cli(*run_args()).exit_code == 0

    case = request_of(fake).case
    assert case is not None
    assert case.pull == f"{REGISTRY}/case/demo/{TASK_ID}:1"


def test_build_skips_the_pull(
    catalog: Path, fake: FakeBackend, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(catalog.parent, {f"case/demo/{TASK_ID}:1": DIGEST})
    monkeypatch.setenv("SSEBENCH_REGISTRY", REGISTRY)

    assert cli(*run_args("--build")).exit_code == 0

    case = request_of(fake).case
    assert case is not None and case.pull is None


def test_a_prebuilt_run_takes_only_the_metadata_even_without_a_local_folder(
    catalog: Path, fake: FakeBackend, cli: Cli, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "published"
    elsewhere.mkdir()
    moved = elsewhere / MANIFEST_FILE
    catalog.rename(moved)

    outcome = cli(*run_args("--catalog", str(moved), "--prebuilt"))

    assert outcome.exit_code == 0, outcome.stderr
    request = request_of(fake)
    assert request.case is None and request.prebuilt
    assert request.task.id == TASK_ID
    assert not Path(request.task.folder).exists()


def test_local_wins_over_the_catalog(
    catalog: Path, fake: FakeBackend, cli: Cli, home: Path
) -> None:
    outcome = cli(*run_args("--local", str(home / "datasets" / "demo")))

    assert outcome.exit_code == 0, outcome.stderr
    assert request_of(fake).case is None


def test_the_catalog_comes_from_the_environment(
    catalog: Path, fake: FakeBackend, cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    write_task(other, "other-task")
    (other / "dataset.yaml").write_text('version: "2"\nname: other\n')
    monkeypatch.setenv("SSEBENCH_CATALOG", str(publish(other)))

    outcome = cli(*run_args()[:2], "other-task", *run_args()[3:])

    assert outcome.exit_code == 0, outcome.stderr
    assert request_of(fake).task.folder == str(other / "other-task")


def test_a_provenance_digest_follows_the_manifest(
    catalog: Path, fake: FakeBackend, cli: Cli
) -> None:
    outcome = cli(*run_args("--json"))

    assert outcome.exit_code == 0, outcome.stderr
    case = request_of(fake).case
    assert case is not None
    assert len(files_digest(case.files)) == 64
    assert json.loads(outcome.stdout)["provenance"]["dataset"] == "demo"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "JSON is malformed: object keys must be strings (byte 1)"),
        (
            '{"format": 1, "dataset": "d", "version": "1", "tasks": [], "extra": 1}',
            "Object contains unknown field `extra`",
        ),
        (
            '{"format": 9, "dataset": "d", "version": "1", "tasks": []}',
            "format 9 is not one this SSEBench reads (it reads 1)",
        ),
        ('{"format": 1, "dataset": "d", "version": "1"}', "Object missing required field `tasks`"),
        (
            '{"format": 1, "dataset": "d", "version": "1", "tasks": [{"id": "../x"}]}',
            "Object missing required field `case_image` - at `$.tasks[0]`",
        ),
    ],
    ids=["not JSON", "unknown key", "other format", "no tasks", "incomplete task"],
)
def test_a_bad_manifest_is_refused_in_one_line(
    fake: FakeBackend, cli: Cli, tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / MANIFEST_FILE
    path.write_text(content)

    line = refused(cli(*run_args("--catalog", str(path))), fake)

    assert line == f"catalog {path}: {message}"


def test_a_missing_catalog_is_refused_in_one_line(
    fake: FakeBackend, cli: Cli, tmp_path: Path
) -> None:
    path = tmp_path / "nowhere" / MANIFEST_FILE

    line = refused(cli(*run_args("--catalog", str(path))), fake)

    assert line == f"catalog {path}: cannot read it (No such file or directory)"


def test_a_lock_with_a_malformed_digest_is_refused_in_one_line(
    catalog: Path, fake: FakeBackend, cli: Cli
) -> None:
    (catalog.parent / LOCK_FILE).write_text(
        json.dumps({"format": 1, "images": {f"case/demo/{TASK_ID}:1": "sha256:nothex"}})
    )

    line = refused(cli(*run_args()), fake)

    assert line == (
        f"catalog {catalog.parent / LOCK_FILE}: case/demo/{TASK_ID}:1 is pinned to "
        "'sha256:nothex', not sha256:<64 hex>"
    )


def test_an_unknown_task_lists_the_catalogs_tasks(
    catalog: Path, fake: FakeBackend, cli: Cli
) -> None:
    args = run_args()
    args[args.index("--task") + 1] = "nope"

    line = refused(cli(*args), fake)

    assert line == f"unknown task 'nope' in catalog {catalog}: tasks there are {TASK_ID}"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--build", "--prebuilt"), "--build builds the case image and --prebuilt builds nothing"),
        (("--local", "."), "--local and --catalog both say where the task comes from"),
    ],
)
def test_conflicting_options_are_refused_in_one_line(
    catalog: Path, fake: FakeBackend, cli: Cli, extra: tuple[str, ...], message: str
) -> None:
    args = run_args(*extra)
    if "--local" in extra:
        args += ["--catalog", str(catalog)]

    assert refused(cli(*args), fake).startswith(message)


def test_dataset_publish_without_a_registry_writes_the_manifest_only(
    home: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSEBENCH_REGISTRY", "ssebench-unit")
    dataset = home / "datasets" / "demo"
    for script in (dataset / TASK_ID / "sse").glob("*.sh"):
        script.chmod(0o755)

    outcome = cli("dataset", "publish", "--json")

    assert outcome.exit_code == 0, outcome.stderr
    answer = json.loads(outcome.stdout)
    assert answer == {"manifest": str(dataset / MANIFEST_FILE), "lock": None, "images": {}}
    assert "a local prefix: wrote the manifest only" in outcome.stderr
    assert not (dataset / LOCK_FILE).exists()
    manifest = json.loads((dataset / MANIFEST_FILE).read_text())
    (entry,) = manifest["tasks"]
    assert entry["case_image"] == f"case/demo/{TASK_ID}:1"
    assert entry["files"]["sse/build.sh"].endswith(" +x")
    assert sorted(entry["files"]) == sorted(
        ["Dockerfile", "sse/config.yaml"]
        + [f"sse/{name}" for name in ("build.sh", "run.sh", "test.sh")]
        + ["sse/diffs/patch.diff", "sse/diffs/test.diff", "sse/pocs/one.bin"]
    )


def test_dataset_publish_refuses_a_broken_dataset_in_one_line(
    home: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSEBENCH_REGISTRY", "ssebench-unit")
    dataset = home / "datasets" / "demo"

    outcome = cli("dataset", "publish")

    assert outcome.exit_code == 1
    assert outcome.stderr.splitlines() == [
        f"ssebench: task {TASK_ID}: sse/build.sh (scripts.build) is not executable: chmod +x "
        "it (a broken task is not published; `ssebench dataset validate` lists every problem)"
    ]
    assert not (dataset / MANIFEST_FILE).exists()
