"""`ssebench runs stop` while the evaluator grades, on the cluster, in both modes.

The slow-grader test agent makes the task's build take a minute (the package the
build imports sleeps), so grading is in progress when the stop lands. The run must
be recorded as stopped, with the error grade the entrypoint wrote ("during the
grading phase") and every log written so far; after `runs remove` nothing of the
run is left.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from kubernetes import client

from .conftest import REGISTRY, ROOT
from .test_runs import SSEBENCH, TASKS, _cli, _gone, _leftovers, _wait_for_line

pytestmark = pytest.mark.k8s

AGENT = "slow-grader"
TASK = TASKS[0]  # pyarchive: its build imports the package


@pytest.fixture(scope="session")
def pushed_slow_grader(kube: client.ApiClient) -> str:
    """The slow-grader's images for the pyarchive task, both modes, in the cluster's registry."""
    env = {
        **os.environ,
        "SSEBENCH_REGISTRY": REGISTRY,
        "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents"),
    }
    subprocess.run(
        [
            *(SSEBENCH, "images", "push", "--agents", AGENT, "--tasks", TASK),
            *("--mode", "both", "--force", "--local", str(ROOT / "datasets/demo")),
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return REGISTRY


@pytest.mark.parametrize("mode", ["sandbox", "sidecar"])
def test_runs_stop_while_grading_records_the_error_and_the_logs_then_remove_clears_all(
    mode: str,
    pushed_slow_grader: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    run_id = f"stop-grading-{mode}-{os.getpid()}"
    env = {**os.environ, **k8s_env, "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents")}
    cli = subprocess.Popen(
        [
            *(SSEBENCH, "run", "--task", TASK, "--agent", AGENT, "--backend", "k8s"),
            *("--mode", mode, "--prebuilt", "--run-id", run_id, "--keep-container"),
            *("--local", str(ROOT / "datasets/demo")),
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_line(run_id, "evaluator started")
        stopped = _cli(["runs", "stop", run_id], k8s_env, tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        _, stderr = cli.communicate(timeout=180)
    finally:
        if cli.poll() is None:
            cli.kill()
    run_dir = tmp_path / "results" / TASK / "none" / AGENT / run_id
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "stopped", (summary, stderr)
    assert summary["config"]["mode"] == mode
    patch = summary["patch_result"]
    assert patch["status"] == "error", patch
    assert "during the grading phase" in (patch["error_msg"] or ""), patch
    assert "slow grader: the build now takes a minute" in (run_dir / "agent.log").read_text()
    assert (run_dir / "evaluator.log").is_file()
    assert (run_dir / "entrypoint.log").read_text()
    assert (run_dir / "daemon.log").read_text()
    assert "+_slow.sleep(60)" in (run_dir / "final.patch").read_text()

    # A kept run stays until `runs remove`; then nothing of it is left.
    assert _leftovers(kube, backend_namespace, run_id) != []
    removed = _cli(["runs", "remove", run_id], k8s_env, tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert _gone(kube, backend_namespace, run_id) == []
