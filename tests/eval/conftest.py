"""Fixtures of the evaluation tests: headless Chromium, and a recorded evaluation made of files."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from ssebench.spec import EvalRecord, EvalSettings, EvalSlot, encode_json


def missing(reason: str) -> None:
    """Skip, or fail under CI=true (as the root conftest's `missing` does)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: a missing tool is a failure, not a skip)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium(chromium_executable: str) -> str:
    """Debian's chromium (the root conftest installs it), run without a network: needs root
    and unshare."""
    if os.geteuid() != 0:
        missing("opening pages in Chromium without a network needs root (unshare --net)")
    if shutil.which("unshare") is None:
        missing("unshare (util-linux) is missing: Chromium must run without a network")
    return chromium_executable


def recorded_eval(
    root: Path, outcomes: dict[tuple[str, str], Sequence[str]], *, seconds: float = 5.0
) -> Path:
    """An evaluation folder and its run directories, as `ssebench eval` leaves them.

    Args:
        root: where `results/` and `evals/<id>/` go.
        outcomes: per (task, agent), the outcome of each repeat.
        seconds: the agent's time in each run.

    Returns:
        The evaluation's folder.
    """
    tasks = sorted({task for task, _ in outcomes})
    agents = sorted({agent for _, agent in outcomes})
    repeat = max(len(each) for each in outcomes.values())
    slots = []
    for (task, agent), ends in outcomes.items():
        for number, outcome in enumerate(ends, start=1):
            run_id = f"r-{task}-{agent}-{number}"
            slots.append(
                EvalSlot(task=task, agent=agent, model="none", repeat=number, run_ids=[run_id])
            )
            folder = root / "results" / task / "none" / agent / run_id
            folder.mkdir(parents=True)
            status = {"passed": "passed", "infra_error": "error", "grader_error": "error"}.get(
                outcome, "failed"
            )
            passed = outcome == "passed"
            summary = {
                "task": task,
                "config": {
                    "agent": agent,
                    "model": "none",
                    "mode": "sandbox",
                    "backend": "docker",
                    "difficulty": 2,
                    "timeout": 3600,
                    "egress": "restricted",
                    "reference_run": agent == "reference",
                    "keep": False,
                },
                "patch_result": {
                    "status": status,
                    "build_success": True,
                    "pov_passed": int(passed),
                    "pov_total": 1,
                    "func_test_success": True,
                    "intent_test_success": passed,
                },
                "runtime_result": {"agent_duration": seconds},
                "run_id": run_id,
                "started_at": "2025-01-02T03:04:05+00:00",
                "outcome": outcome,
            }
            (folder / "summary.json").write_text(json.dumps(summary))
    record = EvalRecord(
        eval_id="e2e",
        created_at="2025-01-02T03:04:05+00:00",
        settings=EvalSettings(
            dataset=str(root / "dataset"),
            tasks=tasks,
            agents=agents,
            models=["none"],
            mode="sandbox",
            difficulty=2,
            repeat=repeat,
            timeout=3600,
            check_timeout=1800,
            egress="restricted",
            backend="docker",
        ),
        results=str(root / "results"),
        slots=slots,
    )
    folder = root / "evals" / "e2e"
    folder.mkdir(parents=True)
    (folder / "eval.json").write_bytes(encode_json(record))
    return folder
