"""The hostile agent image (tests/integrity/agents/hostile-image, issue 38) on the cluster, in
both modes: its build replaces python3, git, tar, chmod, chown, mkdir, make and the compiler
with recorders that answer success, puts its own folder first on PATH and breaks libz. The
pod's checker never runs its image, so the run is graded as the dummy agent's, and every
recorder ran as `model` (the agent's own positive control) and as nobody else: not the
keeper, not a probe, not the copy-out.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ssebench.spec import labels

from .conftest import REGISTRY, ROOT
from .test_runs import SSEBENCH, TASKS, _cli, _gone

pytestmark = pytest.mark.k8s

TASK = TASKS[0]
AGENT_PATH = os.pathsep.join(
    str(ROOT / folder) for folder in ("tests/integrity/agents", "tests/agents")
)
MODES = ("sandbox", "sidecar")


@pytest.fixture(scope="module")
def pushed_hostile_images(kube: client.ApiClient) -> str:
    """The hostile-image, dummy and stubborn-sh agents' images of one demo task, both modes,
    pushed once."""
    env = {**os.environ, "SSEBENCH_REGISTRY": REGISTRY, "SSEBENCH_AGENT_PATH": AGENT_PATH}
    subprocess.run(
        [
            *(
                SSEBENCH,
                "images",
                "push",
                "--agents",
                "hostile-image,dummy,stubborn-sh",
                "--tasks",
                TASK,
            ),
            *("--mode", "both", "--force"),
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return REGISTRY


def _run(mode: str, agent: str, env: dict[str, str], cwd: Path, *more: str) -> Path:
    run_id = f"k8s-hostile-{mode}-{agent}-{os.getpid()}"
    done = _cli(
        [
            *("run", "--task", TASK, "--agent", agent, "--mode", mode, "--difficulty", "1"),
            *("--backend", "k8s", "--prebuilt", "--run-id", run_id),
            *("--local", str(ROOT / "datasets/demo"), *more),
        ],
        {**env, "SSEBENCH_AGENT_PATH": AGENT_PATH},
        cwd,
    )
    run_dir = cwd / "results" / TASK / "none" / agent / run_id
    assert done.returncode == 0 and run_dir.is_dir(), done.stderr
    return run_dir


def _grade(run_dir: Path) -> dict[str, Any]:
    """What grading found, without what differs between any two runs."""
    result = json.loads((run_dir / "result.json").read_text())
    runtime = dict(result["runtime_result"])
    runtime.pop("agent_duration", None)
    return {"patch_result": result["patch_result"], "runtime_result": runtime}


@pytest.mark.parametrize("mode", MODES)
def test_a_hostile_image_is_graded_as_the_dummy_agent_on_the_cluster_and_runs_as_model_only(
    mode: str,
    pushed_hostile_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    hostile = _run(mode, "hostile-image", k8s_env, tmp_path)
    dummy = _run(mode, "dummy", k8s_env, tmp_path)
    record = (hostile / "archive" / "hostile-record.txt").read_text().splitlines()
    assert "1000 python3" in record, record
    assert {line.split()[0] for line in record} == {"1000"}, record
    assert (hostile / "archive" / "hostile-zlib.txt").read_text() == "broken\n"
    # No hidden folder in the agent container, and no process but model's there.
    assert (hostile / "archive" / "hostile-view.txt").read_text() == "uid 1000\n"
    graded = _grade(hostile)
    assert graded == _grade(dummy)
    assert graded["patch_result"]["status"] == "failed"
    assert _gone(kube, backend_namespace, hostile.name) == []


def test_an_image_whose_sh_always_succeeds_is_still_stopped(
    pushed_hostile_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    """The agent container's liveness is the kubelet's request to the checker, not a program
    of its image. The stubborn-sh agent's /bin/sh answers success to everything: a `sh -c
    'kill -TERM 1'` in it would do nothing, and so would an `exec` probe's `! test -e
    kill`. Its kept run (graded at the time limit, its launcher staying up as a kept run's
    does) is stopped all the same: the agent container ends."""
    run_dir = _run(
        "sandbox", "stubborn-sh", k8s_env, tmp_path, "--timeout", "15", "--keep-container"
    )
    run_id = run_dir.name
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["runtime_result"]["agent_timeout"] is True, summary["runtime_result"]
        assert _agent_state(kube, backend_namespace, run_id).running is not None
        stopped = _cli(["runs", "stop", run_id, "--grace", "2"], k8s_env, tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        deadline = time.monotonic() + 60
        while (state := _agent_state(kube, backend_namespace, run_id)).terminated is None:
            assert time.monotonic() < deadline, f"the agent container still runs: {state}"
            time.sleep(1)
    finally:
        removed = _cli(["runs", "remove", run_id], k8s_env, tmp_path)
        assert removed.returncode == 0, removed.stderr
    assert _gone(kube, backend_namespace, run_id) == []


def test_runs_stop_runs_no_program_of_the_agents_image(
    pushed_hostile_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    """`runs stop` of a running run ends its agent container through the kill file (the
    checker's alive port answers 503, the kubelet's probe ends it), and runs nothing in
    it: the stubborn-sh agent's /bin/sh records every call into the run's archive."""
    run_id = f"k8s-stop-nothing-run-{os.getpid()}"
    cli = subprocess.Popen(
        [
            SSEBENCH,
            *("run", "--task", TASK, "--agent", "stubborn-sh", "--mode", "sandbox"),
            *("--difficulty", "1", "--backend", "k8s", "--prebuilt", "--run-id", run_id),
            *("--local", str(ROOT / "datasets/demo"), "--timeout", "600"),
        ],
        env={**k8s_env, "SSEBENCH_AGENT_PATH": AGENT_PATH},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not _agent_runs(kube, backend_namespace, run_id):
            assert cli.poll() is None, cli.communicate()[1]
            assert time.monotonic() < deadline, "the agent container never ran"
            time.sleep(1)
        stopped = _cli(["runs", "stop", run_id, "--grace", "2"], k8s_env, tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        _, said = cli.communicate(timeout=300)
    finally:
        if cli.poll() is None:
            cli.kill()
    run_dir = tmp_path / "results" / TASK / "none" / "stubborn-sh" / run_id
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "stopped", said[-2000:]
    calls = run_dir / "archive" / "stubborn-sh-calls"
    assert not calls.exists(), calls.read_text()
    assert _gone(kube, backend_namespace, run_id) == []


def _agent_runs(kube: client.ApiClient, namespace: str, run_id: str) -> bool:
    """Whether the run pod's agent container runs (no pod yet: not yet)."""
    try:
        return _agent_state(kube, namespace, run_id).running is not None
    except (ValueError, TypeError, StopIteration):
        return False


def _agent_state(kube: client.ApiClient, namespace: str, run_id: str) -> Any:
    """The state of the run pod's agent container (`run`)."""
    (pod,) = (
        client.CoreV1Api(kube)
        .list_namespaced_pod(namespace, label_selector=f"{labels.RUN_ID}={run_id}")
        .items
    )
    return next(s for s in pod.status.container_statuses if s.name == "run").state
