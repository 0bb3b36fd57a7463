"""Sidecar mode end to end: `ssebench run --mode sidecar` builds the two images, runs the
pair of containers and grades it exactly as sandbox mode does.

The security properties of a pair are tests/integrity/test_sidecar.py; the rest of the
integrity suite runs in both modes.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from ssebench.spec import contract, labels

HOME = Path(__file__).resolve().parents[2]
TEST_AGENTS = Path(__file__).resolve().parents[1] / "agents"
DEMO_TASKS = ("tlvkit-heap-overflow", "pyarchive-path-traversal")

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]


def ssebench_argv() -> list[str]:
    """The installed `ssebench` command of this environment."""
    script = Path(sys.executable).with_name("ssebench")
    return [str(script if script.exists() else shutil.which("ssebench") or "ssebench")]


def run_env() -> dict[str, str]:
    return {**os.environ, "SSEBENCH_AGENT_PATH": str(TEST_AGENTS), "SSEBENCH_HOME": str(HOME)}


@dataclass(frozen=True)
class Finished:
    returncode: int
    stderr: str
    run_dir: Path
    run_id: str

    def json(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / name).read_text())
        return data


def leftovers(client: docker.DockerClient, run_id: str) -> list[str]:
    """Containers, networks and volumes carrying the run's ID or its pair's label."""
    found: set[str] = set()
    for label in (labels.RUN_ID, labels.RUN):
        wanted = {"label": f"{label}={run_id}"}
        found |= {f"container {c.name}" for c in client.containers.list(all=True, filters=wanted)}
        found |= {f"network {n.name}" for n in client.networks.list(filters=wanted)}
        found |= {f"volume {v.name}" for v in client.volumes.list(filters=wanted)}
    return sorted(found)


def remove_everything(client: docker.DockerClient, run_id: str) -> None:
    """What a failed test may leave: the agent container before the task container."""
    for label in (labels.RUN, labels.RUN_ID):
        wanted = {"label": f"{label}={run_id}"}
        for container in client.containers.list(all=True, filters=wanted):
            container.remove(force=True, v=True)
    for network in client.networks.list(filters={"label": f"{labels.RUN_ID}={run_id}"}):
        network.remove()
    for volume in client.volumes.list(filters={"label": f"{labels.RUN}={run_id}"}):
        volume.remove(force=True)


RunCli = Callable[..., Finished]


@pytest.fixture
def ssebench_run(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[RunCli]:
    """Run `ssebench run` in tmp_path; whatever its runs leave is removed afterwards."""
    run_ids: list[str] = []

    def run(task: str, agent: str, mode: str, *options: str) -> Finished:
        run_id = f"e2e-{mode}-{agent}-{secrets.token_hex(3)}"
        run_ids.append(run_id)
        argv = [*ssebench_argv(), "run", "--task", task, "--agent", agent, "--mode", mode]
        done = subprocess.run(
            [*argv, "--run-id", run_id, *options],
            cwd=tmp_path,
            env=run_env(),
            capture_output=True,
            text=True,
            timeout=1500,
            check=False,
        )
        run_dir = tmp_path / "results" / task / "none" / agent / run_id
        return Finished(done.returncode, done.stderr, run_dir, run_id)

    yield run
    for run_id in run_ids:
        remove_everything(docker_client, run_id)


_VOLATILE = re.compile(r"==\d+==|0x[0-9a-f]+")
"""What differs between two runs of the same check: AddressSanitizer's pids and addresses."""


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A result.json without what may differ between two runs: the mode and the tool layer
    (sandbox only: a sidecar run has its own two layers), the timings, and the pids and
    addresses in a check's log."""
    result = json.loads(json.dumps(result))
    result["config"].pop("mode")
    result["config"].pop("tool_layer")
    result["runtime_result"].pop("agent_duration")
    patch = result["patch_result"]
    if patch.get("error_log"):
        patch["error_log"] = _VOLATILE.sub("#", patch["error_log"])
    return result


@pytest.mark.parametrize("task", DEMO_TASKS)
def test_both_agents_grade_the_same_in_sidecar_as_in_sandbox_mode(
    task: str, ssebench_run: RunCli, docker_client: docker.DockerClient
) -> None:
    done = {
        (agent, mode): ssebench_run(task, agent, mode, "--difficulty", "1")
        for agent in ("reference", "dummy")
        for mode in ("sandbox", "sidecar")
    }
    for (agent, mode), finished in done.items():
        assert finished.returncode == 0, f"{agent} {mode}: {finished.stderr}"
        assert leftovers(docker_client, finished.run_id) == [], (agent, mode)
        assert finished.json("summary.json")["config"]["mode"] == mode

    reference = done["reference", "sidecar"].json("result.json")["patch_result"]
    assert reference["status"] == "passed", reference
    assert reference["build_success"] is True
    assert reference["pov_total"] >= 1
    assert reference["pov_passed"] == reference["pov_total"]
    assert reference["func_test_success"] is True
    assert reference["intent_test_success"] is True
    dummy = done["dummy", "sidecar"].json("result.json")["patch_result"]
    assert dummy["status"] == "failed", dummy
    assert dummy["pov_passed"] == 0
    for agent in ("reference", "dummy"):
        sandbox = comparable(done[agent, "sandbox"].json("result.json"))
        sidecar = comparable(done[agent, "sidecar"].json("result.json"))
        assert sidecar == sandbox, agent


def runs_command(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*ssebench_argv(), "runs", *args], capture_output=True, text=True, check=False
    )
    if check:
        assert done.returncode == 0, f"ssebench runs {' '.join(args)}: {done.stderr}"
    return done


def test_a_kept_pair_is_one_run_for_ssebench_runs(
    ssebench_run: RunCli, docker_client: docker.DockerClient
) -> None:
    """list shows it once; exec and endpoint reach the task container by default and the
    agent container with --container agent; logs shows the agent's output; remove takes
    both containers and both volumes."""
    done = ssebench_run(DEMO_TASKS[1], "dummy", "sidecar", "--keep-container")
    assert done.returncode == 0, done.stderr
    assert (done.run_dir / contract.GRADED_MARKER).exists()
    run_id = done.run_id
    assert len(leftovers(docker_client, run_id)) == 4  # two containers, two volumes

    listed = json.loads(runs_command("list", "--json").stdout)["runs"]
    assert [run["state"] for run in listed if run["run_id"] == run_id] == ["running"]
    assert runs_command("exec", run_id, "--", "test", "-d", "/ssebench-repo").returncode == 0
    in_agent = runs_command(
        "exec", run_id, "--container", "agent", "--", "test", "-e", "/ssebench-repo", check=False
    )
    assert in_agent.returncode == 1
    assert runs_command("exec", run_id, "--container", "agent", "--", "test", "-d", "/opt/agent")
    assert "dummy agent: working in" in runs_command("logs", run_id).stdout
    url = json.loads(runs_command("endpoint", run_id, "4263", "--json").stdout)["url"]
    with urllib.request.urlopen(f"{url}/version", timeout=10) as answer:
        assert answer.status == 200

    runs_command("stop", run_id, "--grace", "5")
    states = {
        c.name: c.status
        for c in docker_client.containers.list(
            all=True, filters={"label": f"{labels.RUN}={run_id}"}
        )
    }
    assert sorted(states.values()) == ["exited", "exited"], states
    runs_command("remove", run_id)
    assert leftovers(docker_client, run_id) == []


def _wait_for_agent(client: docker.DockerClient, run_id: str, deadline: float) -> None:
    wanted = {"label": f"{labels.RUN}={run_id}"}
    while time.monotonic() < deadline:
        for container in client.containers.list(filters=wanted):
            if "sleeper agent: started" in container.logs().decode(errors="replace"):
                return
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} never started its agent")


def test_sigterm_to_the_cli_mid_run_is_recorded_as_stopped_and_leaves_nothing(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    run_id = f"e2e-sidecar-sigterm-{secrets.token_hex(3)}"
    argv = [*ssebench_argv(), "run", "--task", DEMO_TASKS[1], "--agent", "sleeper"]
    cli = subprocess.Popen(
        [*argv, "--mode", "sidecar", "--run-id", run_id, "--timeout", "600"],
        cwd=tmp_path,
        env=run_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_agent(docker_client, run_id, time.monotonic() + 900)
        cli.send_signal(signal.SIGTERM)
        _, stderr = cli.communicate(timeout=120)
        # What the CLI left, before this test removes anything: a check made after the
        # removal below could not fail.
        left = leftovers(docker_client, run_id)
    finally:
        if cli.poll() is None:
            cli.kill()
        remove_everything(docker_client, run_id)

    run_dir = tmp_path / "results" / DEMO_TASKS[1] / "none" / "sleeper" / run_id
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "stopped", stderr
    assert summary["config"]["mode"] == "sidecar"
    assert left == [], stderr


def test_an_invalid_mode_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    argv = [*ssebench_argv(), "run", "--task", DEMO_TASKS[1], "--agent", "dummy"]
    done = subprocess.run(
        [*argv, "--mode", "sidekick"],
        cwd=tmp_path,
        env=run_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == "ssebench: invalid mode 'sidekick': use sandbox or sidecar\n"
    assert list(tmp_path.iterdir()) == []
