"""Issue 23 on Kubernetes: a run's limits on its pod (a memory hog dies inside them and
the run is graded), and the renewed lease `ssebench runs reap` reads: a dead runner's
run is reaped (on its machine at once, elsewhere once its lease expired), a live
runner's and a kept one are not.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.utils import parse_quantity

from ssebench.spec import Mount, RunSpec, contract, get_backend, labels
from ssebench.spec.lease import LEASE_TTL, current_lease, renewal

from .test_runs import ROOT, SSEBENCH, TASKS, _cli, _gone, _leftovers, _wait_for_line

# A fork bomb and a memory hog on the node, and a lease's timing: nothing beside them.
pytestmark = [pytest.mark.k8s, pytest.mark.alone]

DEMO = str(ROOT / "datasets/demo")


def _pod(kube: client.ApiClient, namespace: str, run_id: str) -> client.V1Pod:
    (pod,) = (
        client.CoreV1Api(kube)
        .list_namespaced_pod(namespace, label_selector=f"{labels.RUN_ID}={run_id}")
        .items
    )
    return pod


def test_a_run_s_pod_carries_its_limits_and_a_memory_hog_dies_inside_them_graded(
    pushed_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    run_id = f"memhog-{os.getpid()}"
    env = {**k8s_env, "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents")}
    done = _cli(
        [
            *("run", "--task", TASKS[0], "--agent", "memhog", "--backend", "k8s", "--prebuilt"),
            *("--run-id", run_id, "--keep-container", "--timeout", "300"),
            *("--memory", "256m", "--cpus", "0.5", "--pids-limit", "256", "--local", DEMO),
        ],
        env,
        tmp_path,
    )
    try:
        assert done.returncode == 0, done.stderr
        containers = _pod(kube, backend_namespace, run_id).spec.containers
        run = next(c for c in containers if c.name == "run")
    finally:
        removed = _cli(["runs", "remove", run_id], k8s_env, tmp_path)
    assert removed.returncode == 0, removed.stderr
    limits, requests = run.resources.limits, run.resources.requests
    assert parse_quantity(limits["cpu"]) == Decimal("0.5")
    assert parse_quantity(limits["memory"]) == 256 * 1024**2
    assert parse_quantity(requests["cpu"]) <= parse_quantity(limits["cpu"])
    assert parse_quantity(requests["memory"]) <= parse_quantity(limits["memory"])

    run_dir = tmp_path / "results" / TASKS[0] / "none" / "memhog" / run_id
    summary = json.loads((run_dir / "summary.json").read_text())
    # Graded, not `error`: the OOM killer took the hog (128 + SIGKILL), not a root service.
    assert summary["patch_result"]["status"] == "failed", summary["patch_result"]
    assert summary["runtime_result"]["agent_exit_code"] == 137, summary["runtime_result"]
    assert summary["config"]["resources"] == {"cpus": 0.5, "memory": 256 * 1024**2, "pids": 256}
    assert "memhog agent: oom_score_adj 1000" in (run_dir / "agent.log").read_text()
    # The root services left the kubelet's Burstable score (990 here), 1 % of the limit
    # below the agent's, for 0 (`ROOT_OOM_SCORE_ADJ`).
    log = (run_dir / "entrypoint.log").read_text()
    assert re.search(r"oom_score_adj 9\d\d lowered to 0: ", log), log
    assert _gone(kube, backend_namespace, run_id) == []


def test_a_fork_bomb_is_held_to_the_run_s_process_limit_and_a_run_beside_it_passes(
    pushed_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    """No kernel limit per pod: the agent container's watchdog (the launcher's,
    `ssebench.daemon._pids`) kills the bomb (which left its process group with setsid)
    past `--pids-limit`; the run is graded, and a reference run started beside it
    passes."""
    tag = os.getpid()
    bomb_id, beside_id = f"bomb-{tag}", f"beside-{tag}"
    env = {**os.environ, **k8s_env, "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents")}
    common = ("--backend", "k8s", "--prebuilt", "--local", DEMO, "--timeout", "300")
    beside = subprocess.Popen(
        [SSEBENCH, "run", "--task", TASKS[1], "--agent", "reference", "--run-id", beside_id,
         *common],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        bomb = _cli(
            ["run", "--task", TASKS[1], "--agent", "forkbomb", "--run-id", bomb_id, *common,
             "--pids-limit", "128", "--cpus", "0.5", "--memory", "512m"],
            env, tmp_path,
        )  # fmt: skip
        _, beside_err = beside.communicate(timeout=900)
    finally:
        if beside.poll() is None:
            beside.kill()
            beside.wait()
    assert bomb.returncode == 0, bomb.stderr
    assert beside.returncode == 0, beside_err
    results = tmp_path / "results" / TASKS[1] / "none"
    summary = json.loads((results / "forkbomb" / bomb_id / "summary.json").read_text())
    # Graded, not `error`: the watchdog killed the agent's processes (the agent too: 137).
    assert summary["patch_result"]["status"] == "failed", summary["patch_result"]
    assert summary["runtime_result"]["agent_exit_code"] == 137, summary["runtime_result"]
    assert summary["config"]["resources"]["pids"] == 128
    checker_log = (results / "forkbomb" / bomb_id / "entrypoint.log").read_text()
    # Without it the bomb's small processes (1000) and a root service (the kubelet's 990)
    # were neck and neck in the OOM killer's eyes: the service was killed, the run lost.
    assert re.search(r"oom_score_adj 9\d\d lowered to 0: ", checker_log), checker_log
    log = (results / "forkbomb" / bomb_id / "agent.log").read_text()
    assert "process limit 128 (SSE_PIDS_LIMIT): not held by the kernel (cgroup pids.max max)" in log
    passed = [line for line in log.splitlines() if "process limit 128 passed: " in line]
    assert passed and passed[0].endswith("killing every process of model"), log
    killed = [line for line in log.splitlines() if "process limit 128: killed " in line]
    assert killed and "process(es) of model (uid 1000)" in killed[0], log
    # Its count when caught: past the limit, at most the pod's podPidsLimit (4096).
    counted = int(passed[0].split("passed: ")[1].split()[0])
    assert 128 < counted <= 4096, passed[0]
    print(f"fork bomb caught at {counted} processes and threads; {killed[0]}")
    other = json.loads((results / "reference" / beside_id / "summary.json").read_text())
    assert other["patch_result"]["status"] == "passed", other["patch_result"]
    assert _gone(kube, backend_namespace, bomb_id) == []


def _sleeper(run_id: str, env: dict[str, str], cwd: Path, *keep: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(SSEBENCH, "run", "--task", TASKS[1], "--agent", "sleeper", "--backend", "k8s"),
            *("--prebuilt", "--run-id", run_id, *keep, "--local", DEMO),
        ],
        env={**os.environ, **env, "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents")},
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _renewed(kube: client.ApiClient, namespace: str, run_id: str) -> datetime:
    value = _pod(kube, namespace, run_id).metadata.annotations[labels.LEASE_RENEWED]
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def test_runs_reap_removes_a_dead_runner_s_run_and_keeps_a_live_and_a_kept_one(
    pushed_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    from ssebench.spec.lease import RENEW_EVERY

    tag = os.getpid()
    dead, kept, live = f"dead-{tag}", f"kept-{tag}", f"live-{tag}"
    clis = {
        dead: _sleeper(dead, k8s_env, tmp_path),
        kept: _sleeper(kept, k8s_env, tmp_path, "--keep-container"),
        live: _sleeper(live, k8s_env, tmp_path),
    }
    try:
        for run_id in clis:
            _wait_for_line(run_id, "sleeper agent: started")
        # The live runner renews its lease while it lives.
        first = _renewed(kube, backend_namespace, live)
        time.sleep(RENEW_EVERY + 3)
        assert _renewed(kube, backend_namespace, live) > first
        for run_id in (dead, kept):
            clis[run_id].send_signal(signal.SIGKILL)
            clis[run_id].wait()

        reaped = _cli(["runs", "reap", "--json"], k8s_env, tmp_path)

        assert reaped.returncode == 0, reaped.stderr
        entries = {entry["run_id"]: entry for entry in json.loads(reaped.stdout)}
        assert set(entries) == {dead}, entries
        assert (entries[dead]["action"], entries[dead]["recorded"]) == ("removed", True)
        assert _gone(kube, backend_namespace, dead) == []
        assert _leftovers(kube, backend_namespace, kept) != []
        assert _leftovers(kube, backend_namespace, live) != []
        run_dir = tmp_path / "results" / TASKS[1] / "none" / "sleeper" / dead
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["outcome"] == "infra_error", summary
        assert "ended before recording the run" in summary["patch_result"]["error_msg"]
    finally:
        for cli in clis.values():
            if cli.poll() is None:
                cli.send_signal(signal.SIGTERM)
        for cli in clis.values():
            try:
                cli.wait(timeout=120)
            except subprocess.TimeoutExpired:
                cli.kill()
        for run_id in clis:
            _cli(["runs", "remove", run_id], k8s_env, tmp_path)
    assert all(_gone(kube, backend_namespace, run_id) == [] for run_id in clis)


def test_a_run_whose_runner_elsewhere_stopped_renewing_its_lease_is_reaped(
    stubborn_image: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    """A runner on another machine: its PID means nothing here, its lease's age does."""
    run_dir = tmp_path / "run"
    (run_dir / "archive").mkdir(parents=True)
    elsewhere = {**current_lease(), labels.LEASE_MACHINE: "another-machine"}
    backend = get_backend("k8s")
    handles = {}
    for run_id in (f"expired-{os.getpid()}", f"renewed-{os.getpid()}"):
        spec = RunSpec(
            run_id=run_id,
            task_name="t",
            mode="sandbox",
            image=stubborn_image,
            env={"SSE_RESULTS": contract.RESULTS_DIR, "SSE_ARCHIVE": contract.ARCHIVE_DIR},
            results=Mount(target=contract.RESULTS_DIR, source=str(run_dir)),
            archive=Mount(target=contract.ARCHIVE_DIR, source=str(run_dir / "archive")),
            labels={
                labels.RUN_ID: run_id,
                labels.WEBUI: "true",
                labels.RESULTS: str(run_dir),
                **elsewhere,
            },
        )
        handles[run_id] = backend.start(spec)
    expired, renewed = handles
    try:
        # Its runner died LEASE_TTL ago: no renewal since (this process renews the other).
        backend._stop_renewing(handles[expired].name)  # type: ignore[attr-defined]
        stale = renewal(datetime.now(UTC) - timedelta(seconds=LEASE_TTL + 10))
        client.CoreV1Api(kube).patch_namespaced_pod(
            handles[expired].pod, backend_namespace, {"metadata": {"annotations": stale}}
        )

        reaped = _cli(["runs", "reap", "--json"], k8s_env, tmp_path)

        assert reaped.returncode == 0, reaped.stderr
        entries = json.loads(reaped.stdout)
        assert [(e["run_id"], e["action"], e["recorded"]) for e in entries] == [
            (expired, "removed", False)
        ]
        assert _gone(kube, backend_namespace, expired) == []
        assert _leftovers(kube, backend_namespace, renewed) != []
    finally:
        for handle in handles.values():
            backend.remove(handle)
