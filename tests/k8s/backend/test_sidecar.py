"""Sidecar mode on the cluster, driven as a user does: `ssebench run --mode sidecar
--backend k8s --prebuilt`, both images from the cluster's registry, the backend's own
ServiceAccount. A pair is one pod: the task container and the agent's (_sidecar.py).
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ssebench.spec import labels

from .conftest import REGISTRY, ROOT
from .test_runs import (
    EXPECTED,
    SSEBENCH,
    TASKS,
    _cli,
    _comparable,
    _gone,
    _leftovers,
    _wait_for_line,
)

pytestmark = pytest.mark.k8s

AGENTS = "reference,dummy,sleeper"
IN_AGENT = ("test", "-e", "/ssebench-repo")
SAY = ("sh", "-c", 'echo "$PASSED as $(id -un)"; ls -d /tmp/.ssebench-exec-* 2>&1')
"""Says the passed value and who ran it, then looks for staged values left behind."""


@pytest.fixture(scope="session")
def pushed_sidecar_images(kube: client.ApiClient) -> str:
    """The sidecar images of the demo tasks (task containers) and of the reference, dummy
    and sleeper agents (one per agent), in the cluster's registry (once)."""
    env = {
        **os.environ,
        "SSEBENCH_REGISTRY": REGISTRY,
        "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents"),
    }
    subprocess.run(
        [SSEBENCH, "images", "push", "--agents", AGENTS, "--mode", "sidecar", "--force"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return REGISTRY


def _run(backend: str, task: str, agent: str, env: dict[str, str], cwd: Path, *more: str) -> Path:
    run_id = f"{backend}-sc-{agent}-{task[:8]}-{os.getpid()}"
    done = _cli(
        [
            *("run", "--task", task, "--agent", agent, "--mode", "sidecar"),
            *("--backend", backend, "--prebuilt", "--run-id", run_id),
            *("--local", str(ROOT / "datasets/demo"), *more),
        ],
        env,
        cwd,
    )
    run_dir = cwd / "results" / task / "none" / agent / run_id
    assert done.returncode == 0 and run_dir.is_dir(), done.stderr
    return run_dir


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("agent", sorted(EXPECTED))
def test_a_sidecar_run_in_one_pod_grades_as_on_docker_and_leaves_nothing(
    task: str,
    agent: str,
    pushed_sidecar_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    on_k8s = _run("k8s", task, agent, k8s_env, tmp_path)
    on_docker = _run("docker", task, agent, {"SSEBENCH_REGISTRY": pushed_sidecar_images}, tmp_path)

    summary = json.loads((on_k8s / "summary.json").read_text())
    assert summary["outcome"] == EXPECTED[agent], summary
    assert summary["config"]["mode"] == "sidecar"
    started = summary["provenance"]["images"]
    assert started["agent"].startswith(f"{pushed_sidecar_images}/agent-{agent}/sidecar@sha256:")
    assert started["environment"].startswith(
        f"{pushed_sidecar_images}/tool-sidecar/{task}@sha256:"
    ), started
    # The daemon's log comes from the task container, the agent's from the agent container.
    assert (on_k8s / "daemon.log").read_text()
    assert (on_k8s / "agent.log").is_file() and (on_k8s / "evaluator.log").is_file()
    assert _comparable(on_k8s) == _comparable(on_docker)
    assert _gone(kube, backend_namespace, on_k8s.name) == []


def _runs(env: dict[str, str], cwd: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [SSEBENCH, "runs", *args],
        env={**os.environ, **env},
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"runs {' '.join(args)}: {done.stderr}"
    return done.stdout


def _statuses(kube: client.ApiClient, namespace: str, run_id: str) -> list[Any]:
    """The statuses of the run's containers (the keeper's left out)."""
    (pod,) = (
        client.CoreV1Api(kube)
        .list_namespaced_pod(namespace, label_selector=f"{labels.RUN_ID}={run_id}")
        .items
    )
    return [s for s in pod.status.container_statuses if s.name != "keeper"]


def test_a_kept_pair_is_one_run_for_ssebench_runs_and_exec_reaches_either_container(
    pushed_sidecar_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    """list shows it once; exec reaches the task container by default and the agent's with
    --container agent, passes stdin to its end, a variable by name and a terminal; logs
    show the agent; endpoint reaches the daemon; stop ends both; remove leaves nothing."""
    run_dir = _run("k8s", TASKS[1], "dummy", k8s_env, tmp_path, "--keep-container")
    run_id = run_dir.name
    try:
        listed = json.loads(_runs(k8s_env, tmp_path, "list", "--json"))
        assert listed["supports_exec"] is True
        assert [r["state"] for r in listed["runs"] if r["run_id"] == run_id] == ["running"]

        assert _runs(k8s_env, tmp_path, "exec", run_id, "--", "test", "-d", "/ssebench-repo") == ""
        in_agent = subprocess.run(
            [SSEBENCH, "runs", "exec", run_id, "--container", "agent", "--", *IN_AGENT],
            env={**os.environ, **k8s_env},
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert in_agent.returncode == 1, in_agent.stderr
        echoed = _runs(k8s_env, tmp_path, "exec", run_id, "-i", "--", "cat", stdin="to the end\n")
        assert echoed == "to the end\n"
        secret = "not-on-any-command-line-" + os.urandom(6).hex()
        said = subprocess.run(
            [SSEBENCH, "runs", "exec", run_id, "--user", "model", "-e", "PASSED", "--", *SAY],
            env={**os.environ, **k8s_env, "PASSED": secret},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert said.stdout.splitlines()[0] == f"{secret} as model", said.stderr
        assert "No such file" in said.stdout, "the staged values were not removed"

        # A terminal: the command sees one.
        pid, fd = pty.fork()
        if pid == 0:  # pragma: no cover - the child
            os.environ.update(k8s_env)
            os.execv(SSEBENCH, [SSEBENCH, "runs", "exec", run_id, "-t", "--", "sh", "-c", "tty"])
        out = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, out
        assert b"/dev/pts/" in out, out

        assert "dummy agent: working in" in _runs(k8s_env, tmp_path, "logs", run_id)
        url = json.loads(_runs(k8s_env, tmp_path, "endpoint", run_id, "4263", "--json"))["url"]
        with urllib.request.urlopen(f"{url}/version", timeout=20) as answer:
            assert answer.status == 200

        # One pod; its task container started first (and, kept, both still run).
        started = {
            s.name: s.state.running.started_at for s in _statuses(kube, backend_namespace, run_id)
        }
        assert started["task"] <= started["run"], started

        _runs(k8s_env, tmp_path, "stop", run_id, "--grace", "5")
        ended = {
            s.name: s.state.terminated is not None
            for s in _statuses(kube, backend_namespace, run_id)
        }
        assert ended == {"run": True, "task": True}, ended
    finally:
        _runs(k8s_env, tmp_path, "remove", run_id)
    assert _gone(kube, backend_namespace, run_id) == []
    assert _leftovers(kube, backend_namespace, run_id) == []


def test_sigterm_to_the_cli_mid_run_is_recorded_as_stopped_and_leaves_nothing(
    pushed_sidecar_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    run_id = f"sc-sigterm-{os.getpid()}"
    env = {**os.environ, **k8s_env, "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents")}
    cli = subprocess.Popen(
        [
            *(SSEBENCH, "run", "--task", TASKS[1], "--agent", "sleeper", "--mode", "sidecar"),
            *("--backend", "k8s", "--prebuilt", "--run-id", run_id, "--timeout", "600"),
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
        cli.send_signal(signal.SIGTERM)
        _, stderr = cli.communicate(timeout=180)
    finally:
        if cli.poll() is None:
            cli.kill()
    run_dir = tmp_path / "results" / TASKS[1] / "none" / "sleeper" / run_id
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "stopped", stderr
    assert summary["config"]["mode"] == "sidecar"
    assert "sleeper agent: started" in (run_dir / "agent.log").read_text()
    assert (run_dir / "daemon.log").read_text()
    assert _gone(kube, backend_namespace, run_id) == [], stderr


def test_a_pair_that_ignores_sigterm_is_ended_past_its_grace_and_what_it_wrote_is_kept(
    stubborn_image: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    """Both containers ignore SIGTERM: each is ended by its own kill file, the agent's
    first; the keeper keeps what the agent's wrote until it is collected."""
    from ssebench.spec import Mount, RunSpec, SidecarPair, contract, get_backend

    run_dir = tmp_path / "run"
    (run_dir / "archive").mkdir(parents=True)
    run_id = f"sc-stubborn-{os.getpid()}"
    env = {contract.ENV_RESULTS: contract.RESULTS_DIR, contract.ENV_ARCHIVE: contract.ARCHIVE_DIR}
    pair = SidecarPair.create(
        run_id=run_id, environment_image=stubborn_image, source_dir="/src-none", env=env
    )
    spec = RunSpec(
        run_id=run_id,
        task_name="t",
        mode="sidecar",
        sidecar=pair,
        image=stubborn_image,
        env=env,
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
        codes = {
            s.name: s.state.terminated.exit_code for s in _statuses(kube, backend_namespace, run_id)
        }
        assert codes == {"run": 137, "task": 137}, codes
        backend.collect_results(handle, run_dir)
    finally:
        backend.cleanup(handle)
    assert json.loads((run_dir / "result.json").read_text()) == {"written": "before the stop"}
    assert (run_dir / "archive/dialog.jsonl").read_text() == "from the agent\n"
    assert _gone(kube, backend_namespace, run_id) == []
