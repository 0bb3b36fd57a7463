"""`ssebench runs results`: finished runs from summary.json files, no backend needed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ssebench.runs import FinishedRun, scan_results

from .conftest import Invoke


def summary(
    run_id: str,
    started_at: str,
    *,
    status: str = "passed",
    agent: str = "probe",
    outcome: str | None = None,
) -> dict[str, Any]:
    """A summary.json as the runner writes it (`outcome` left out: as before it existed)."""
    written = {
        "task": "probe-task",
        "config": {
            "agent": agent,
            "model": "none",
            "mode": "sandbox",
            "backend": "docker",
            "difficulty": 0,
            "timeout": 3600,
            "egress": "restricted",
            "reference_run": False,
            "keep": False,
        },
        "patch_result": {
            "status": status,
            "build_success": True,
            "pov_passed": 1,
            "pov_total": 2,
            "func_test_success": status == "passed",
            "intent_test_success": None,
            "error_msg": None,
            "error_log": None,
        },
        "runtime_result": {"agent_duration": 3.5, "agent_exit_code": 0},
        "run_id": run_id,
        "started_at": started_at,
        "spend": 0.25,
        "field_of_a_newer_runner": {"kept": True},
    }
    if outcome is not None:
        written["outcome"] = outcome
    return written


def record(
    root: Path, run_id: str, content: bytes | dict[str, Any], *, agent: str = "probe"
) -> Path:
    """Write a run directory with its summary.json and a `latest` link to it."""
    run_dir = root / "probe-task" / "none" / agent / run_id
    (run_dir / "archive").mkdir(parents=True)
    data = content if isinstance(content, bytes) else json.dumps(content).encode()
    (run_dir / "summary.json").write_bytes(data)
    (run_dir / "result.json").write_text("{}")
    latest = run_dir.parent / "latest"
    latest.unlink(missing_ok=True)
    latest.symlink_to(run_id)
    return run_dir


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Two good runs, one of another agent, and every kind of file that is not a summary."""
    root = tmp_path / "results"
    record(root, "old", summary("old", "2025-01-01T10:00:00+00:00", status="failed"))
    record(root, "new", summary("new", "2025-03-01T10:00:00+00:00", outcome="agent_timeout"))
    record(root, "mid", summary("mid", "2025-02-01T10:00:00+00:00", agent="other"), agent="other")
    record(root, "corrupt", b'{"task": "probe-task", "config": ')
    record(root, "foreign", {"hello": "world"})
    record(root, "a-list", b"[1, 2, 3]")
    record(root, "binary", b"\xff\xfe\x00garbage")
    record(root, "wrong-type", {**summary("x", "2025-01-01T00:00:00+00:00"), "run_id": 7})
    odd = root / "probe-task" / "none" / "probe" / "folder"
    (odd / "summary.json").mkdir(parents=True)
    # Files a plain read would hang on or never finish reading.
    fifo = root / "probe-task" / "none" / "probe" / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "summary.json")
    endless = root / "probe-task" / "none" / "probe" / "endless"
    endless.mkdir()
    (endless / "summary.json").symlink_to("/dev/zero")
    # A run still in progress: no summary yet, and its archive holds something that looks like one.
    running = root / "probe-task" / "none" / "probe" / "running"
    (running / "archive").mkdir(parents=True)
    (running / "result.json").write_text("")
    (running / "archive" / "summary.json").write_text(json.dumps(summary("planted", "2030-01-01")))
    (root / "notes.txt").write_text("not a run")
    return root


def test_results_lists_each_finished_run_once_newest_first(invoke: Invoke, results: Path) -> None:
    outcome = invoke("results", "--json", "--dir", str(results))
    assert outcome.code == 0
    runs = json.loads(outcome.out)
    assert [run["run_id"] for run in runs] == ["new", "mid", "old"]
    assert runs[0] == {
        "run_id": "new",
        "task": "probe-task",
        "agent": "probe",
        "model": "none",
        "status": "passed",
        "outcome": "agent_timeout",
        "checks": {
            "build": "passed",
            "poc": "failed",
            "function_test": "passed",
            "intent_test": "not run",
            "pocs_fixed": 1,
            "pocs_total": 2,
        },
        "started_at": "2025-03-01T10:00:00+00:00",
        "run_dir": str(results.absolute() / "probe-task" / "none" / "probe" / "new"),
    }
    assert runs[1]["outcome"] is None, "a run recorded before outcomes existed has none"


def test_results_skips_corrupt_and_foreign_files_with_one_warning_each(
    invoke: Invoke, results: Path
) -> None:
    outcome = invoke("results", "--json", "--dir", str(results))
    assert outcome.code == 0
    warnings = outcome.err.splitlines()
    assert len(warnings) == 8, warnings
    assert all(line.startswith("ssebench runs: warning: ") for line in warnings)
    for name in (
        "corrupt",
        "foreign",
        "a-list",
        "binary",
        "wrong-type",
        "folder",
        "fifo",
        "endless",
    ):
        assert sum(f"/{name}/summary.json" in line for line in warnings) == 1, name
    assert "Traceback" not in outcome.err


def test_results_does_not_look_inside_a_run_directory(invoke: Invoke, results: Path) -> None:
    outcome = invoke("results", "--json", "--dir", str(results))
    assert "planted" not in outcome.out
    assert "running" not in outcome.err


@pytest.mark.parametrize("columns", ["160", "40"])
def test_results_shows_a_table_for_people(invoke: Invoke, results: Path, columns: str) -> None:
    outcome = invoke("results", "--dir", str(results), env={"COLUMNS": columns})
    assert outcome.code == 0
    lines = outcome.out.splitlines()
    assert "RUN ID" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == ["new", "mid", "old"]
    assert "1/2" in lines[1]
    assert "2025-03-01 10:00:00" in lines[1]
    assert "agent_timeout" in lines[1]
    assert "OUTCOME" in lines[0]
    assert "…" not in outcome.out


def test_results_of_a_missing_folder_is_an_empty_list(invoke: Invoke, tmp_path: Path) -> None:
    outcome = invoke("results", "--json", "--dir", str(tmp_path / "nothing"))
    assert (outcome.code, json.loads(outcome.out), outcome.err) == (0, [], "")
    outcome = invoke("results", "--dir", str(tmp_path / "nothing"))
    assert outcome.code == 0
    assert "no finished runs" in outcome.err


def test_results_reads_results_in_the_current_directory_by_default(
    invoke: Invoke, results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(results.parent)
    outcome = invoke("results", "--json")
    assert [run["run_id"] for run in json.loads(outcome.out)] == ["new", "mid", "old"]


def test_results_also_takes_one_run_directory(results: Path) -> None:
    warnings: list[str] = []
    found = scan_results(results / "probe-task" / "none" / "other" / "mid", warnings.append)
    assert [run.run_id for run in found] == ["mid"]
    assert warnings == []


def test_an_unreadable_folder_is_skipped_with_a_warning(
    results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Denied by the kernel as it would be for another user (root reads every folder).
    locked = str(results.absolute() / "probe-task" / "none" / "probe")
    scandir = os.scandir

    def denying(path: str) -> Any:
        if path == locked:
            raise PermissionError(13, "Permission denied", path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", denying)
    warnings: list[str] = []
    found = scan_results(results, warnings.append)
    assert [run.run_id for run in found] == ["mid"]
    assert warnings == [f"skipped {locked}: cannot list: Permission denied"]


def test_a_finished_run_round_trips_through_json(results: Path) -> None:
    import msgspec

    found = scan_results(results, lambda message: None)
    encoded = msgspec.json.encode(found)
    assert msgspec.json.decode(encoded, type=list[FinishedRun]) == found


@pytest.mark.process
def test_results_into_a_closed_pipe_end_quietly(results: Path) -> None:
    import subprocess

    from .conftest import RUNS_EXE

    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [str(RUNS_EXE), "results", "--json", "--dir", str(results)],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(writer)
    assert done.returncode == 0
    assert "Traceback" not in done.stderr
    assert "Broken pipe" not in done.stderr
