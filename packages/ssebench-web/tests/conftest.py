"""The web app's tests drive the shared fake backend (ssebench.conformance.fake)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from ssebench.conformance.fake import FakeBackend
from ssebench.spec import RunHandle, RunInfo, RunState, labels
from ssebench.web._app import create_app
from ssebench.web._assets import node_modules

TOKEN = "test-token-0123456789"


class ReachingBackend(FakeBackend):
    """The fake platform, able to reach a run's ports and run commands in it."""

    supports_exec = True
    daemon_url = "http://127.0.0.1:9"

    def endpoint(self, handle: RunHandle, port: int) -> str:
        return self.daemon_url

    def exec_argv(self, handle: RunHandle, command: Sequence[str], **options: Any) -> list[str]:
        # A local shell stands in for the container's: it prints who it is asked to be.
        script = f"echo user={options.get('user')} in={options.get('container')}; exec sh"
        return [sys.executable, "-c", f"import os; os.execvp('sh', ['sh', '-c', {script!r}])"]


def fake_run(
    run_id: str,
    results: Path,
    *,
    state: RunState = "running",
    created_at: str = "2025-01-02T03:04:05Z",
    task: str = "probe-task",
) -> RunInfo:
    name = f"ssebench-{run_id}-probe"
    return RunInfo(
        run_id=run_id,
        name=name,
        state=state,
        image="fake/probe:1",
        created_at=created_at,
        labels={
            labels.RUN_ID: run_id,
            labels.WEBUI: "true",
            labels.TASK_ID: task,
            labels.MODEL: "none",
            labels.AGENT: "probe",
            labels.RESULTS: str(results / task / "none" / "probe" / run_id),
            labels.REFERENCE_RUN: "false",
        },
        handle=RunHandle(run_id=run_id, name=name, keep=True),
    )


def summary(
    run_id: str,
    started_at: str,
    *,
    outcome: str = "passed",
    task: str = "probe-task",
    agent: str = "probe",
    touched: bool = False,
) -> dict[str, Any]:
    return {
        "task": task,
        "config": {
            "agent": agent,
            "model": "none",
            "mode": "sandbox",
            "backend": "fake",
            "difficulty": 0,
            "timeout": 3600,
            "egress": "restricted",
            "reference_run": False,
            "keep": False,
        },
        "patch_result": {
            "status": "passed" if outcome == "passed" else "failed",
            "build_success": True,
            "pov_passed": 1,
            "pov_total": 1,
            "func_test_success": outcome == "passed",
            "intent_test_success": None,
        },
        "runtime_result": {"agent_duration": 3.5, "agent_exit_code": 0},
        "run_id": run_id,
        "started_at": started_at,
        "outcome": outcome,
        "touched": touched,
        "touched_at": "2025-01-02T03:05:00+00:00" if touched else None,
    }


def record(
    results: Path,
    run_id: str,
    content: dict[str, Any],
    *,
    task: str = "probe-task",
    agent: str = "probe",
) -> Path:
    run_dir = results / task / "none" / agent / run_id
    (run_dir / "archive").mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps(content))
    (run_dir / "result.json").write_text("{}")
    return run_dir


Client = Callable[..., TestClient]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    return folder


@pytest.fixture
def backend() -> ReachingBackend:
    return ReachingBackend(images={})


@pytest.fixture
def client(backend: FakeBackend, results: Path, tmp_path: Path) -> TestClient:
    """A client that already has the token's cookie (its first visit is done)."""
    app = create_app(backend, results, tmp_path / "evals", TOKEN, node_modules())
    test_client = TestClient(app)
    first = test_client.get(f"/?token={TOKEN}", follow_redirects=False)
    assert first.status_code == 303
    return test_client


@pytest.fixture
def anonymous(backend: FakeBackend, results: Path, tmp_path: Path) -> TestClient:
    app = create_app(backend, results, tmp_path / "evals", TOKEN, node_modules())
    return TestClient(app)
