"""What `ssebench run` and `ssebench tasks list` print, their exit statuses, and run IDs."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from ssebench.conformance.fake import FakeBackend
from ssebench.runner._commands_run import run_app
from ssebench.runner._options import new_run_id, validate_run_id
from ssebench.spec import Summary, decode_json

from .conftest import TASK_CONFIG, TASK_ID, run_args, run_dir, write_task
from .fakes import FAILED_RESULT, fake_backend

Cli = Callable[..., Result]
UseBackend = Callable[..., None]


def test_run_ids_sort_by_time() -> None:
    start = datetime(2025, 12, 31, 23, 59, 59, 998000, tzinfo=UTC)
    steps = [
        timedelta(0),
        timedelta(milliseconds=1),
        timedelta(milliseconds=2),
        timedelta(seconds=1),
        timedelta(days=1),
        timedelta(days=400),
    ]
    ids = [new_run_id(start + step) for step in steps]

    assert sorted(ids) == ids
    assert len(set(ids)) == len(ids)
    for run_id in ids:
        assert validate_run_id(run_id) == run_id


def test_a_run_id_is_made_from_the_utc_time() -> None:
    local = datetime(2025, 1, 2, 5, 4, 5, 678000).astimezone()

    run_id = new_run_id(local)

    expected = local.astimezone(UTC).strftime("%Y%m%dT%H%M%S") + ".678Z-"
    assert run_id.startswith(expected)
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{8}", run_id)


def test_a_run_without_a_run_id_gets_a_fresh_one(fake: FakeBackend, cli: Cli) -> None:
    args = run_args()
    del args[args.index("--run-id") : args.index("--run-id") + 2]

    outcome = cli(*args)

    assert outcome.exit_code == 0, outcome.stderr
    (folder,) = [p for p in run_dir().parent.iterdir() if p.name != "latest"]
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{8}", folder.name)
    assert json.loads((folder / "summary.json").read_text())["run_id"] == folder.name


def test_the_cli_prints_the_grade_and_the_run_directory(fake: FakeBackend, cli: Cli) -> None:
    outcome = cli(*run_args())

    assert outcome.exit_code == 0
    rows = [" ".join(line.split()) for line in outcome.stdout.splitlines()]
    assert rows == [
        "task demo-task",
        "agent dummy 1.0",
        "model none",
        "status passed",
        "outcome passed",
        "build passed",
        "poc 2 of 2 fixed",
        "function_test passed",
        "intent_test not run",
        f"run directory {run_dir()}",
    ]
    assert "run directory:" in outcome.stderr


def test_an_error_is_shown_with_its_reason(home: Path, use_backend: UseBackend, cli: Cli) -> None:
    use_backend(fake_backend(fail_start=True))

    outcome = cli(*run_args())

    # An infra_error says nothing about the agent: exit 1 with one line, no grade table.
    assert outcome.exit_code == 1
    assert outcome.stdout == ""
    last = outcome.stderr.splitlines()[-1]
    assert last.startswith("ssebench: run run-1 ended in infra_error: the run failed to start")
    assert last.endswith("recorded in results/demo-task/none/dummy/run-1")
    assert "[no room]" not in outcome.stderr


def test_json_prints_the_summary_alone_on_stdout(
    fake: FakeBackend, cli: Cli, capfd: pytest.CaptureFixture[str]
) -> None:
    def chatty_container(_: object) -> None:
        print("the container's python says hello")
        os.write(1, b"the container's process says hello\n")

    fake.hooks["start"] = chatty_container

    outcome = cli(*run_args("--json"))

    assert outcome.exit_code == 0, outcome.stderr
    summary = decode_json(outcome.stdout, Summary)
    assert summary.run_id == "run-1"
    assert summary.patch_result.status == "passed"
    assert "the container's python says hello" in outcome.stderr
    fds = capfd.readouterr()
    assert "says hello" not in fds.out
    assert "the container's process says hello" in fds.err


def test_require_pass_exits_1_unless_the_run_passed(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    use_backend(fake_backend(result=json.dumps(FAILED_RESULT).encode()))

    failed = cli(*run_args("--require-pass", run_id="failed"))
    without = cli(*run_args(run_id="without"))

    assert failed.exit_code == 1
    assert without.exit_code == 0
    assert (
        json.loads((run_dir(run_id="failed") / "summary.json").read_text())["patch_result"][
            "status"
        ]
        == "failed"
    )


def test_require_pass_exits_0_when_the_run_passed(fake: FakeBackend, cli: Cli) -> None:
    assert cli(*run_args("--require-pass")).exit_code == 0


def test_ssebench_run_is_also_a_command_of_its_own(fake: FakeBackend) -> None:
    outcome = CliRunner().invoke(run_app, run_args()[1:])

    assert outcome.exit_code == 0, outcome.stderr
    assert (run_dir() / "summary.json").is_file()


def test_ssebench_run_is_installed_as_a_script() -> None:
    pyproject = Path(__file__).parents[1] / "pyproject.toml"

    assert 'ssebench-run = "ssebench.runner.cli:run_main"' in pyproject.read_text()


def test_tasks_list_shows_each_task_with_its_checks(home: Path, cli: Cli) -> None:
    outcome = cli("tasks", "list")

    assert outcome.exit_code == 0, outcome.stderr
    assert TASK_ID in outcome.stdout
    assert "build, poc, function_test, intent_test" in outcome.stdout


def test_tasks_list_prints_json(home: Path, cli: Cli, tmp_path: Path) -> None:
    dataset = tmp_path / "other"
    dataset.mkdir()
    (dataset / "dataset.yaml").write_text('version: "1"\n')
    write_task(
        dataset,
        "buildonly",
        config="id: buildonly\nproject: p\nrepository: r\nlanguage: python\nsource: /src\n"
        "task_description:\n  bug_description: b\nscripts:\n  build: scripts/build.sh\n"
        "files:\n  patch: diffs/patch.diff\n",
    )

    outcome = cli("tasks", "list", "--local", str(dataset), "--json")

    assert outcome.exit_code == 0, outcome.stderr
    assert json.loads(outcome.stdout) == [
        {
            "id": "buildonly",
            "project": "p",
            "language": "python",
            "checks": ["build"],
            "problems": [],
        }
    ]


def test_tasks_list_shows_every_broken_task_by_the_task_folders_own_paths(
    home: Path, cli: Cli, tmp_path: Path
) -> None:
    dataset = tmp_path / "mixed"
    dataset.mkdir()
    (dataset / "dataset.yaml").write_text('version: "1"\n')
    write_task(dataset, "a-no-poc")
    (dataset / "a-no-poc" / "sse" / "pocs" / "one.bin").unlink()
    write_task(dataset, "b-renamed", config=TASK_CONFIG)  # its id says demo-task
    (write_task(dataset, "c-unreadable") / "sse" / "config.yaml").write_text("colour: blue\n")
    write_task(dataset, "d-earlier").joinpath("Dockerfile").write_text(
        "FROM ssebench/base-c:1\nRUN git clone https://example.invalid/p.git /src/p\n"
    )
    write_task(dataset, "demo-task")

    table = cli("tasks", "list", "--local", str(dataset))
    listed = cli("tasks", "list", "--local", str(dataset), "--json")

    assert table.exit_code == listed.exit_code == 1
    assert "demo-task" in table.stdout and "build, poc" in table.stdout
    problems = {entry["id"]: entry["problems"] for entry in json.loads(listed.stdout)}
    assert problems["demo-task"] == []
    assert problems["a-no-poc"] == ["sse/pocs/one.bin (files.poc 'pocs/one.bin') is missing"]
    assert problems["b-renamed"] == [
        f"{dataset / 'b-renamed' / 'sse' / 'config.yaml'}: key 'id' is 'demo-task' but the "
        "task folder is 'b-renamed'; they must be the same (rename the folder or change 'id')"
    ]
    assert "unknown key 'colour'" in problems["c-unreadable"][0]
    assert [problem.split(":")[0] for problem in problems["d-earlier"]] == [
        "Dockerfile line 1",
        "Dockerfile line 2",
    ]
    assert "FROM ${SSEBENCH_BASE_IMAGE}" in problems["d-earlier"][0]
    assert "COPY them" in problems["d-earlier"][1]
    # Every problem of every broken task, one line each, also beside the table.
    said = table.stderr.splitlines()
    assert len(said) == 5
    assert all(line.startswith("ssebench: task ") for line in said)


def test_tasks_list_reports_a_missing_dataset_in_one_line(cli: Cli, tmp_path: Path) -> None:
    outcome = cli("tasks", "list", "--local", str(tmp_path / "nowhere"))

    assert outcome.exit_code == 1
    assert outcome.stderr == f"ssebench: dataset folder {tmp_path / 'nowhere'} does not exist\n"


def test_public_names_are_sorted_and_exist() -> None:
    import ssebench.runner

    def isort_style(name: str) -> tuple[int, str]:  # ruff's RUF022 order
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert ssebench.runner.__all__ == sorted(ssebench.runner.__all__, key=isort_style)
    for name in ssebench.runner.__all__:
        assert hasattr(ssebench.runner, name), name
