"""`ssebench runs` against a fake backend: what each command prints and how it exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ssebench.runs
from ssebench.conformance.fake import FakeBackend
from ssebench.runs.cli import app
from ssebench.spec import BACKENDS_GROUP, RunHandle, labels
from ssebench.spec.touched import touched_at

from .conftest import Invoke
from .fakes import SECRET, acts, fake_run, listing, reaching, replaced, seeded

UseBackend = Callable[[FakeBackend], FakeBackend]

NAMING_COMMANDS: list[list[str]] = [
    ["inspect"],
    ["logs"],
    ["stop"],
    ["remove"],
    ["endpoint", "{id}", "4263"],
    ["exec", "{id}", "--", "true"],
]


def _args(command: list[str], run_id: str) -> list[str]:
    if len(command) == 1:
        return [command[0], run_id]
    return [part.format(id=run_id) for part in command]


def test_list_prints_the_backend_and_its_runs_newest_first_as_json(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    use_backend(
        reaching(
            [
                fake_run("older", created_at="2025-01-01T00:00:00Z", state="exited"),
                fake_run("newer", created_at="2025-02-01T00:00:00Z"),
            ]
        )
    )
    outcome = invoke("list", "--json")
    assert outcome.code == 0
    listed = json.loads(outcome.out)
    assert (listed["backend"], listed["supports_exec"]) == ("fake", True)
    assert [run["run_id"] for run in listed["runs"]] == ["newer", "older"]
    assert listed["runs"][1] == {
        "run_id": "older",
        "name": "ssebench-older-probe",
        "state": "exited",
        "exit_code": 143,
        "image": "fake/probe:1",
        "created_at": "2025-01-01T00:00:00Z",
        "task": "probe-task",
        "model": "none",
        "agent": "probe",
        "reference_run": False,
        "results_dir": "/results/probe-task/none/probe/older",
        "labels": {
            labels.AGENT: "probe",
            labels.MODEL: "none",
            labels.REFERENCE_RUN: "false",
            labels.RESULTS: "/results/probe-task/none/probe/older",
            labels.RUN_ID: "older",
            labels.TASK_ID: "probe-task",
            labels.WEBUI: "true",
        },
    }


def test_list_shows_only_ssebench_labels_and_runs_of_the_runner(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    shown = fake_run("shown", extra_labels={"com.example.env": SECRET})
    hidden = replaced(fake_run("hidden"), labels={labels.RUN_ID: "hidden"})
    use_backend(listing([shown, hidden]))
    outcome = invoke("list", "--json")
    listed = json.loads(outcome.out)
    assert [run["run_id"] for run in listed["runs"]] == ["shown"]
    assert listed["supports_exec"] is False
    assert SECRET not in outcome.out


def test_list_shows_a_table_for_people(invoke: Invoke, use_backend: UseBackend) -> None:
    use_backend(listing([fake_run("r1", state="exited")]))
    outcome = invoke("list", env={"COLUMNS": "160"})
    assert outcome.code == 0
    assert "RUN ID" in outcome.out
    assert "exited (143)" in outcome.out
    assert "r1" in outcome.out


def test_a_table_in_a_narrow_terminal_keeps_each_run_on_one_whole_line(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    long_task = "a-task-with-a-rather-long-name-indeed"
    use_backend(listing([fake_run("r1", extra_labels={labels.TASK_ID: long_task})]))
    outcome = invoke("list", env={"COLUMNS": "40"})
    row = [line for line in outcome.out.splitlines() if line.lstrip().startswith("r1 ")]
    assert len(row) == 1
    assert long_task in row[0]
    assert "2025-01-02 03:04:05" in row[0]
    assert "…" not in outcome.out


def test_list_says_when_there_are_no_runs(invoke: Invoke, use_backend: UseBackend) -> None:
    use_backend(listing())
    outcome = invoke("list")
    assert (outcome.code, outcome.out) == (0, "")
    assert "no runs on the fake backend" in outcome.err


@pytest.mark.parametrize("command", NAMING_COMMANDS, ids=lambda command: command[0])
def test_every_command_that_names_an_unknown_run_exits_with_3(
    invoke: Invoke, use_backend: UseBackend, command: list[str]
) -> None:
    use_backend(reaching([fake_run("other")]))
    outcome = invoke(*_args(command, "missing"))
    assert outcome.code == 3
    assert outcome.err == "ssebench runs: no run has the ID 'missing' on the fake backend\n"


@pytest.mark.parametrize("command", NAMING_COMMANDS, ids=lambda command: command[0])
def test_every_command_that_names_a_run_several_runs_have_exits_with_4(
    invoke: Invoke, use_backend: UseBackend, command: list[str]
) -> None:
    backend = use_backend(
        reaching([fake_run("twice", agent="one"), fake_run("twice", agent="two")])
    )
    outcome = invoke(*_args(command, "twice"))
    assert outcome.code == 4
    assert outcome.err.startswith("ssebench runs: 2 runs have the ID 'twice'")
    assert acts(backend) == []


def test_inspect_prints_one_run(invoke: Invoke, use_backend: UseBackend) -> None:
    use_backend(listing([fake_run("r1"), fake_run("r2")]))
    outcome = invoke("inspect", "r2", "--json")
    assert outcome.code == 0
    assert json.loads(outcome.out)["name"] == "ssebench-r2-probe"
    outcome = invoke("inspect", "r2", env={"COLUMNS": "160"})
    assert "/results/probe-task/none/probe/r2" in outcome.out


def test_logs_print_the_output_of_the_named_run(invoke: Invoke, use_backend: UseBackend) -> None:
    backend = use_backend(listing([fake_run("r1"), fake_run("r2")]))
    outcome = invoke("logs", "r2")
    assert outcome.out == "".join(f"line {n} of ssebench-r2-probe\n" for n in range(3))
    assert acts(backend) == [("logs", "ssebench-r2-probe")]


def test_stop_asks_the_backend_with_the_grace_given(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    backend = use_backend(listing([fake_run("r1")]))
    assert invoke("stop", "r1", "--grace", "3").code == 0
    assert invoke("stop", "r1").code == 0
    assert acts(backend) == [
        ("stop", ("ssebench-r1-probe", 3.0)),
        ("stop", ("ssebench-r1-probe", 20.0)),
    ]


def test_remove_removes_a_kept_run_through_the_default_of_the_backend(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    backend = use_backend(listing([fake_run("r1"), fake_run("r2")]))
    outcome = invoke("remove", "r1")
    assert outcome.code == 0
    kept = RunHandle(run_id="r1", name="ssebench-r1-probe", keep=True)
    assert acts(backend) == [
        ("stop", ("ssebench-r1-probe", 0)),
        ("cleanup", replaced(kept, keep=False)),
    ]
    assert [run.run_id for run in backend.list_runs()] == ["r2"]


def test_remove_fails_when_something_of_the_run_is_left(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    use_backend(listing([fake_run("r1")], remove_leaves=True))
    outcome = invoke("remove", "r1")
    assert outcome.code == 1
    assert outcome.err == "ssebench runs: removing run r1 left ssebench-r1-probe in place\n"


def test_endpoint_prints_the_url_of_the_backend(invoke: Invoke, use_backend: UseBackend) -> None:
    use_backend(reaching([fake_run("r1")]))
    assert invoke("endpoint", "r1", "4263").out == "http://fake.invalid:4263\n"
    outcome = invoke("endpoint", "r1", "4096", "--json")
    assert json.loads(outcome.out) == {
        "run_id": "r1",
        "port": 4096,
        "url": "http://fake.invalid:4096",
    }


def test_endpoint_of_a_run_that_is_not_running_is_an_error(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    use_backend(reaching([fake_run("r1", state="exited")]))
    outcome = invoke("endpoint", "r1", "4263")
    assert (outcome.code, outcome.out) == (1, "")
    assert outcome.err == "ssebench runs: run r1 is not running (exited)\n"


def test_endpoint_on_a_backend_without_endpoints_is_an_error(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    use_backend(listing([fake_run("r1")]))
    outcome = invoke("endpoint", "r1", "4263")
    assert outcome.code == 1
    assert outcome.err == "ssebench runs: the fake backend cannot reach a run's ports\n"


def test_exec_replaces_the_process_with_the_command_of_the_backend(
    invoke: Invoke, use_backend: UseBackend, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_backend(reaching([fake_run("r1", extra_labels={labels.RESULTS: str(tmp_path)})]))
    executed: list[list[str]] = []
    monkeypatch.setattr(os, "execvp", lambda file, argv: executed.append([file, *argv]))
    monkeypatch.setenv("PASSED", SECRET)
    outcome = invoke("exec", "r1", "--env", "PASSED", "--user", "nobody", "--", "sh", "-c", "x")
    assert outcome.code == 0
    assert executed == [["echo", "echo", "ssebench-r1-probe", "task", "PASSED", "sh", "-c", "x"]]
    # The run is marked touched (summary.json `touched`) before the command runs.
    assert touched_at(tmp_path) is not None


def test_exec_runs_nothing_when_it_cannot_mark_the_run_touched(
    invoke: Invoke, use_backend: UseBackend, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "gone"
    use_backend(reaching([fake_run("r1", extra_labels={labels.RESULTS: str(missing)})]))
    monkeypatch.setattr(os, "execvp", lambda file, argv: pytest.fail("nothing may run"))
    outcome = invoke("exec", "r1", "--", "true")
    assert outcome.code == 1
    assert outcome.err.startswith(f"ssebench runs: cannot record in {missing} that run r1 was")


def test_exec_and_endpoint_reach_the_agent_container_with_container_agent(
    invoke: Invoke, use_backend: UseBackend, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_backend(reaching([fake_run("r1", extra_labels={labels.RESULTS: str(tmp_path)})]))
    executed: list[list[str]] = []
    monkeypatch.setattr(os, "execvp", lambda file, argv: executed.append([file, *argv]))
    assert invoke("exec", "r1", "--container", "agent", "--", "id").code == 0
    assert executed == [["echo", "echo", "ssebench-r1-probe", "agent", "id"]]
    url = invoke("endpoint", "r1", "3000", "--container", "agent").out
    assert url == "http://fake.invalid:3000/agent\n"


def test_an_unknown_container_is_refused_before_the_backend_is_asked(
    invoke: Invoke, use_backend: UseBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_backend(reaching([fake_run("r1")]))
    monkeypatch.setattr(os, "execvp", lambda file, argv: pytest.fail("nothing may run"))
    for command in (
        ["exec", "r1", "--container", "db", "--", "id"],
        ["endpoint", "r1", "1", "--container", "db"],
    ):
        outcome = invoke(*command)
        assert outcome.code == 1
        assert outcome.err == (
            "ssebench runs: --container 'db' is not a container of a run: use task or agent\n"
        )


@pytest.mark.parametrize("user", ["root", "0", "0:0", "root:model"])
def test_root_in_the_agent_container_is_refused_in_one_line(
    user: str, invoke: Invoke, use_backend: UseBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_backend(reaching([fake_run("r1")]))
    monkeypatch.setattr(os, "execvp", lambda file, argv: pytest.fail("nothing may run"))
    outcome = invoke("exec", "r1", "--user", user, "--container", "agent", "--", "id")
    assert outcome.code == 1
    assert outcome.err == (
        "ssebench runs: --user root --container agent: the agent container never runs root; "
        "use task\n"
    )


def test_exec_on_a_backend_without_exec_exits_with_1(
    invoke: Invoke, use_backend: UseBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_backend(listing([fake_run("r1")]))
    monkeypatch.setattr(os, "execvp", lambda file, argv: pytest.fail("nothing may run"))
    outcome = invoke("exec", "r1", "--", "true")
    assert outcome.code == 1
    assert outcome.err == "ssebench runs: the fake backend cannot run commands in a run\n"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (f"KEY={SECRET}", "--env takes a variable's name, not 'KEY'=..."),
        ("1BAD", "--env takes a variable's name, not '1BAD'=..."),
        (
            "NOT_SET_ANYWHERE",
            "--env NOT_SET_ANYWHERE: NOT_SET_ANYWHERE is not set in this environment",
        ),
    ],
)
def test_exec_takes_variable_names_that_are_set_and_never_shows_a_value(
    invoke: Invoke,
    use_backend: UseBackend,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    message: str,
) -> None:
    use_backend(reaching([fake_run("r1")]))
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    monkeypatch.setattr(os, "execvp", lambda file, argv: pytest.fail("nothing may run"))
    outcome = invoke("exec", "r1", "--env", name, "--", "true")
    assert outcome.code == 1
    assert outcome.err == f"ssebench runs: {message}\n"
    assert SECRET not in outcome.err


def test_exec_in_a_run_that_is_not_running_is_an_error(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    use_backend(reaching([fake_run("r1", state="exited")]))
    outcome = invoke("exec", "r1", "--", "true")
    assert (outcome.code, outcome.err) == (1, "ssebench runs: run r1 is not running (exited)\n")


def test_an_unknown_backend_is_one_line_and_exit_status_1(invoke: Invoke) -> None:
    outcome = invoke("list", "--backend", "no-such-backend")
    assert outcome.code == 1
    assert outcome.err.startswith("ssebench runs: unknown backend 'no-such-backend'")
    assert len(outcome.err.splitlines()) == 1


FAKE_MODULE = """
from ssebench.spec import Backend

class Chosen(Backend):
    name = "chosen"
    def prepare_images(self, request): raise NotImplementedError
    def copy_from_image(self, image, path, dest, platform=None): raise NotImplementedError
    def start(self, spec): raise NotImplementedError
    def wait(self, handle, timeout=None): return 0
    def logs(self, handle, follow=False): yield from ()
    def collect_results(self, handle, dest): pass
    def stop(self, handle, grace=20): pass
    def cleanup(self, handle): pass
    def list_runs(self, labels=None): return []
"""


def test_the_backend_is_chosen_by_the_environment_as_for_ssebench_run(
    invoke: Invoke, install_distribution: Callable[..., None]
) -> None:
    install_distribution(
        name="fake-chosen",
        entry_points={BACKENDS_GROUP: {"chosen": "fake_chosen_backend:Chosen"}},
        modules={"fake_chosen_backend.py": FAKE_MODULE},
    )
    outcome = invoke("list", "--json", env={"SSEBENCH_BACKEND": "chosen"})
    assert json.loads(outcome.out) == {"backend": "chosen", "supports_exec": False, "runs": []}
    sys.modules.pop("fake_chosen_backend", None)


def test_runs_is_mounted_under_ssebench(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from ssebench.runner.cli import app as ssebench_app

    result = CliRunner().invoke(ssebench_app, ["runs", "results", "--json", "--dir", str(tmp_path)])
    assert (result.exit_code, json.loads(result.stdout)) == (0, [])
    result = CliRunner().invoke(ssebench_app, ["runs", "--help"])
    assert "endpoint" in result.stdout


def _modules_after(*args: str) -> set[str]:
    probe = (
        "import sys\n"
        "from ssebench.runs.cli import app\n"
        "try:\n"
        f"    app({list(args)!r}, prog_name='ssebench-runs')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stderr.split())


@pytest.mark.process
def test_results_as_json_imports_neither_a_backend_nor_rich(tmp_path: Any) -> None:
    loaded = _modules_after("results", "--json", "--dir", str(tmp_path))
    assert not {"docker", "rich", "ssebench.backends.docker", "requests", "yaml"} & loaded


@pytest.mark.process
def test_list_as_json_imports_neither_rich_nor_yaml() -> None:
    loaded = _modules_after("list", "--json", "--backend", "no-such-backend")
    assert not {"rich", "yaml"} & loaded


def test_the_public_names_are_sorted() -> None:
    assert ssebench.runs.__all__ == sorted(ssebench.runs.__all__)
    assert all(hasattr(ssebench.runs, name) for name in ssebench.runs.__all__)


def test_app_is_a_typer_with_every_command() -> None:
    import typer

    command = typer.main.get_command(app)
    assert sorted(command.commands) == sorted(  # type: ignore[attr-defined]
        ["list", "inspect", "logs", "stop", "remove", "endpoint", "exec", "reap", "results"]
    )


class _Interrupted(FakeBackend):
    def logs(self, handle: RunHandle, follow: bool = False) -> Iterator[str]:
        yield "before Ctrl-C"
        raise KeyboardInterrupt


def test_ctrl_c_while_following_logs_ends_quietly_with_130(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    use_backend(seeded(_Interrupted(), [fake_run("r1")]))
    outcome = invoke("logs", "r1", "--follow")
    assert (outcome.code, outcome.out, outcome.err) == (130, "before Ctrl-C\n", "")


class _Hostile(FakeBackend):
    def logs(self, handle: RunHandle, follow: bool = False) -> Iterator[str]:
        yield "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\rover\x08\x00written\tok"


def test_logs_reach_the_terminal_without_control_characters(
    invoke: Invoke, use_backend: UseBackend
) -> None:
    use_backend(seeded(_Hostile(), [fake_run("r1")]))
    outcome = invoke("logs", "r1")
    assert outcome.out == "redoverwritten\tok\n"
