"""The k8s backend end to end on the test cluster, driven as a user does: the CLI,
`--backend k8s --prebuilt`, images from the cluster's registry, the backend's own
ServiceAccount (Role in the package) instead of the cluster admin.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ssebench.spec import get_backend, labels

pytestmark = pytest.mark.k8s

ROOT = Path(__file__).resolve().parents[3]
SSEBENCH = str(ROOT / ".venv/bin/ssebench")
TASKS = ("pyarchive-path-traversal", "tlvkit-heap-overflow")
EXPECTED = {"reference": "passed", "dummy": "failed"}
TIMINGS = {"agent_duration", "started_at", "duration", "finished_at"}


def _cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> Any:
    return subprocess.run(
        [SSEBENCH, *args],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _run(backend: str, task: str, agent: str, env: dict[str, str], cwd: Path) -> Path:
    run_id = f"{backend}-{agent}-{task[:8]}-{os.getpid()}"
    done = _cli(
        [
            "run",
            "--task",
            task,
            "--agent",
            agent,
            "--backend",
            backend,
            "--prebuilt",
            "--run-id",
            run_id,
            "--local",
            str(ROOT / "datasets/demo"),
        ],
        env,
        cwd,
    )
    run_dir = cwd / "results" / task / "none" / agent / run_id
    assert run_dir.is_dir(), done.stderr
    return run_dir


def _leftovers(admin: client.ApiClient, namespace: str, run_id: str) -> list[str]:
    found = []
    core, batch = client.CoreV1Api(admin), client.BatchV1Api(admin)
    net = client.NetworkingV1Api(admin)
    selector = f"{labels.RUN_ID}={run_id}"
    for kind, items in (
        ("job", batch.list_namespaced_job(namespace, label_selector=selector).items),
        ("pod", core.list_namespaced_pod(namespace, label_selector=selector).items),
        ("secret", core.list_namespaced_secret(namespace, label_selector=selector).items),
        ("policy", net.list_namespaced_network_policy(namespace, label_selector=selector).items),
    ):
        found += [f"{kind} {item.metadata.name}" for item in items]
    return found


def _gone(admin: client.ApiClient, namespace: str, run_id: str) -> list[str]:
    deadline = time.monotonic() + 60
    while (left := _leftovers(admin, namespace, run_id)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _graded(record: dict[str, Any]) -> dict[str, Any]:
    """A result.json or summary.json without what differs from run to run anywhere."""
    record.pop("config", None)
    for part in record.values():
        if isinstance(part, dict):
            for key in TIMINGS:
                part.pop(key, None)
    # A sanitizer's report names addresses (ASLR) and a PID: they differ run to run anywhere.
    patch = record.get("patch_result") or {}
    if patch.get("error_log"):
        log = re.sub(r"0x[0-9a-f]+", "0x?", patch["error_log"])
        patch["error_log"] = re.sub(r"==\d+==", "==?==", log)
    return record


def _comparable(run_dir: Path) -> dict[str, Any]:
    result = _graded(json.loads((run_dir / "result.json").read_text()))
    summary = _graded(json.loads((run_dir / "summary.json").read_text()))
    # The run's own name and start; the images by where each backend started them (a
    # tag on Docker, the digest the kubelet resolved on the cluster: asserted apart);
    # the inputs digest, which holds the run's settings (its backend among them).
    for key in ("run_id", "started_at"):
        summary.pop(key)
    for key in ("images", "inputs"):
        summary["provenance"].pop(key)
    files = sorted(
        str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.name not in ("run.json",)
    )
    final = (run_dir / "final.patch").read_text()
    return {"result": result, "summary": summary, "files": files, "final.patch": final}


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("agent", sorted(EXPECTED))
def test_a_prebuilt_run_grades_as_on_docker_and_leaves_nothing(
    task: str,
    agent: str,
    pushed_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    on_k8s = _run("k8s", task, agent, k8s_env, tmp_path)
    on_docker = _run("docker", task, agent, {"SSEBENCH_REGISTRY": pushed_images}, tmp_path)

    summary = json.loads((on_k8s / "summary.json").read_text())
    assert summary["outcome"] == EXPECTED[agent], summary
    # Started by tag, recorded by the digest the kubelet resolved it to.
    started = summary["provenance"]["images"]["agent"]
    assert started.startswith(f"{pushed_images}/agent-{agent}/{task}@sha256:"), started
    assert (on_k8s / "agent.log").is_file() and (on_k8s / "evaluator.log").is_file()
    assert (on_k8s / "reference.patch").read_text().startswith("diff --git")
    assert _comparable(on_k8s) == _comparable(on_docker)
    assert _gone(kube, backend_namespace, on_k8s.name) == []


def _wait_for_line(run_id: str, line: str, timeout: float = 300) -> Any:
    backend = get_backend("k8s")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = backend.list_runs({labels.RUN_ID: run_id})
        if (
            found
            and found[0].state == "running"
            and any(line in got for got in backend.logs(found[0].handle))
        ):
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} never printed {line!r}")


def test_runs_stop_in_the_agent_phase_records_the_error_and_the_logs_then_remove_clears_all(
    pushed_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    run_id = f"stop-{os.getpid()}"
    task = TASKS[1]
    env = {**os.environ, **k8s_env, "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents")}
    cli = subprocess.Popen(
        [
            *(SSEBENCH, "run", "--task", task, "--agent", "sleeper", "--backend", "k8s"),
            *("--prebuilt", "--run-id", run_id, "--keep-container"),
            *("--local", str(ROOT / "datasets/demo")),
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_line(run_id, "sleeper agent: started")
        stopped = _cli(["runs", "stop", run_id], k8s_env, tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        _, stderr = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            cli.kill()
    run_dir = tmp_path / "results" / task / "none" / "sleeper" / run_id
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["patch_result"]["status"] == "error", stderr
    assert summary["outcome"] == "stopped", summary
    assert "sleeper agent: started" in (run_dir / "agent.log").read_text()
    assert (run_dir / "entrypoint.log").read_text()

    # A kept run stays until `runs remove`; then nothing of it is left.
    assert _leftovers(kube, backend_namespace, run_id) != []
    removed = _cli(["runs", "remove", run_id], k8s_env, tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert _gone(kube, backend_namespace, run_id) == []


def test_what_a_run_wrote_is_collected_tamed_after_a_stop_past_its_grace(
    stubborn_image: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    from ssebench.spec import Mount, RunSpec, contract

    run_dir = tmp_path / "run"
    (run_dir / "archive").mkdir(parents=True)
    (run_dir / "result.json").write_text("")
    run_id = f"stubborn-{os.getpid()}"
    spec = RunSpec(
        run_id=run_id,
        task_name="t",
        mode="sandbox",
        image=stubborn_image,
        env={"SSE_RESULTS": contract.RESULTS_DIR, "SSE_ARCHIVE": contract.ARCHIVE_DIR},
        results=Mount(target=contract.RESULTS_DIR, source=str(run_dir)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(run_dir / "archive")),
        labels={labels.RUN_ID: run_id, labels.RESULTS: str(run_dir)},
    )
    backend = get_backend("k8s")
    handle = backend.start(spec)
    try:
        _wait_for_line(run_id, "stubborn: written")
        backend.stop(handle, grace=1)
        assert backend.wait(handle, timeout=60) == 137
        backend.collect_results(handle, run_dir)
    finally:
        backend.cleanup(handle)

    assert json.loads((run_dir / "result.json").read_text()) == {"written": "before the stop"}
    assert (run_dir / "agent.log").read_text() == "a log line\n"
    assert (run_dir / "archive/dialog.jsonl").read_text() == "from the agent\n"
    archive = {p.name for p in (run_dir / "archive").iterdir()}
    assert "link-out" not in archive and "fifo" not in archive
    assert (run_dir / "archive/suid").stat().st_mode & 0o7777 == 0o755
    assert _gone(kube, backend_namespace, run_id) == []


def test_runs_endpoint_outlives_its_process_and_remove_ends_it(
    pushed_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    from ssebench.backends.k8s._forward import state_dir

    run_id = f"endpoint-{os.getpid()}"
    task = TASKS[0]
    done = _cli(
        [
            *("run", "--task", task, "--agent", "reference", "--backend", "k8s"),
            *("--prebuilt", "--run-id", run_id, "--keep-container"),
            *("--local", str(ROOT / "datasets/demo")),
        ],
        k8s_env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    try:
        first = _cli(["runs", "endpoint", run_id, "4263"], k8s_env, tmp_path)
        assert first.returncode == 0, first.stderr
        url = first.stdout.strip()
        assert url.startswith("http://127.0.0.1:"), url
        # The process that made it has exited; another one reaches the daemon.
        got = subprocess.run(
            ["curl", "-sf", "--max-time", "20", f"{url}/version"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert got.returncode == 0 and "version" in json.loads(got.stdout), got
        again = _cli(["runs", "endpoint", run_id, "4263"], k8s_env, tmp_path)
        assert again.stdout.strip() == url, "the next call reuses the forward"
        forwards = list(state_dir().glob(f"{backend_namespace}.*.4263.json"))
        pids = [json.loads(p.read_text())["pid"] for p in forwards]
        assert pids
    finally:
        removed = _cli(["runs", "remove", run_id], k8s_env, tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert _gone(kube, backend_namespace, run_id) == []
    time.sleep(1)
    for pid in pids:
        assert (
            not Path(f"/proc/{pid}").exists()
            or b"_forward" not in Path(f"/proc/{pid}/cmdline").read_bytes()
        ), f"forwarder {pid} outlived runs remove"
