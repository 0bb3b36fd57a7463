"""Sandbox mode end to end: `ssebench run` builds the layers, runs a real container, grades it."""

from __future__ import annotations

import json
import os
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


def ssebench_argv() -> list[str]:
    """The installed `ssebench` command of this environment."""
    script = Path(sys.executable).with_name("ssebench")
    return [str(script if script.exists() else shutil.which("ssebench") or "ssebench")]


@dataclass(frozen=True)
class Finished:
    """A finished `ssebench run`: its exit status, output and run directory."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / "summary.json").read_text())
        return data


def new_run_id(label: str) -> str:
    return f"e2e-{label}-{secrets.token_hex(3)}"


def run_env() -> dict[str, str]:
    return {**os.environ, "SSEBENCH_AGENT_PATH": str(TEST_AGENTS), "SSEBENCH_HOME": str(HOME)}


RunCli = Callable[..., Finished]


@pytest.fixture
def ssebench_run(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[RunCli]:
    """Run `ssebench run` in tmp_path; any container of its runs is removed afterwards."""
    run_ids: list[str] = []

    def run(task: str, agent: str, *options: str, timeout: float = 1500) -> Finished:
        run_id = new_run_id(agent)
        run_ids.append(run_id)
        argv = [*ssebench_argv(), "run", "--task", task, "--agent", agent, "--run-id", run_id]
        done = subprocess.run(
            [*argv, "--json", *options],
            cwd=tmp_path,
            env=run_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Finished(
            done.returncode,
            done.stdout,
            done.stderr,
            tmp_path / "results" / task / "none" / agent / run_id,
        )

    yield run
    for run_id in run_ids:
        remove_by_run_id(docker_client, run_id)


def _by_run(run_id: str) -> list[dict[str, str]]:
    """Filters for what a run made: the checker carries its ID label, both containers and
    the volumes of its pair the pair's label."""
    return [{"label": f"{label}={run_id}"} for label in (labels.RUN_ID, labels.RUN)]


def leftovers(client: docker.DockerClient, run_id: str) -> list[str]:
    """Containers, networks and volumes carrying the run's ID label or its pair's."""
    found: set[str] = set()
    for wanted in _by_run(run_id):
        found |= {f"container {c.name}" for c in client.containers.list(all=True, filters=wanted)}
        found |= {f"network {n.name}" for n in client.networks.list(filters=wanted)}
        found |= {f"volume {v.name}" for v in client.volumes.list(filters=wanted)}
    return sorted(found)


def remove_by_run_id(client: docker.DockerClient, run_id: str) -> None:
    for wanted in _by_run(run_id):
        for container in client.containers.list(all=True, filters=wanted):
            container.remove(force=True, v=True)
    for wanted in _by_run(run_id):
        for network in client.networks.list(filters=wanted):
            network.remove()
        for volume in client.volumes.list(filters=wanted):
            volume.remove(force=True)


pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]


@pytest.mark.parametrize("task", DEMO_TASKS)
def test_reference_agent_passes_every_check(
    task: str, ssebench_run: RunCli, docker_client: docker.DockerClient
) -> None:
    done = ssebench_run(
        task, "reference", "--difficulty", "1", "--egress", "restricted", "--timeout", "900"
    )

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary == done.summary()
    result = summary["patch_result"]
    assert result["status"] == "passed", result
    assert result["build_success"] is True
    assert result["pov_total"] >= 1
    assert result["pov_passed"] == result["pov_total"]
    assert result["func_test_success"] is True
    assert result["intent_test_success"] is True
    config = summary["config"]
    assert (config["difficulty"], config["egress"], config["timeout"]) == (1, "restricted", 900)
    assert config["reference_run"] is True
    assert (done.run_dir / "reference.patch").is_file()
    assert json.loads((done.run_dir / "result.json").read_text())["config"] == config
    assert leftovers(docker_client, summary["run_id"]) == []


@pytest.mark.parametrize("task", DEMO_TASKS)
def test_dummy_agent_fails_with_every_poc_triggering(
    task: str, ssebench_run: RunCli, docker_client: docker.DockerClient
) -> None:
    done = ssebench_run(task, "dummy", "--difficulty", "3", "--egress", "open", "--timeout", "1200")

    assert done.returncode == 0, done.stderr
    summary = done.summary()
    result = summary["patch_result"]
    assert result["status"] == "failed", result
    assert result["build_success"] is True
    assert result["func_test_success"] is True
    assert result["pov_total"] >= 1
    assert result["pov_passed"] == 0
    assert result["intent_test_success"] is False
    config = summary["config"]
    assert (config["difficulty"], config["egress"], config["timeout"]) == (3, "open", 1200)
    assert config["reference_run"] is False
    assert summary["runtime_result"]["agent_exit_code"] == 0
    assert leftovers(docker_client, summary["run_id"]) == []


def test_agent_overrunning_its_timeout_is_killed_and_still_graded(ssebench_run: RunCli) -> None:
    done = ssebench_run(DEMO_TASKS[1], "sleeper", "--timeout", "5")

    assert done.returncode == 0, done.stderr
    summary = done.summary()
    assert summary["runtime_result"]["agent_timeout"] is True
    assert summary["runtime_result"]["agent_exit_code"] == 124
    assert summary["patch_result"]["status"] == "failed"
    assert summary["patch_result"]["build_success"] is True
    assert summary["config"]["timeout"] == 5


def test_kept_container_returns_on_the_grade_and_stays_until_removed(
    ssebench_run: RunCli, docker_client: docker.DockerClient
) -> None:
    done = ssebench_run(DEMO_TASKS[1], "dummy", "--keep-container")

    assert done.returncode == 0, done.stderr
    summary = done.summary()
    assert summary["patch_result"]["status"] == "failed"
    assert summary["config"]["keep"] is True
    assert (done.run_dir / contract.GRADED_MARKER).exists()
    run_id = summary["run_id"]
    wanted = {"label": f"{labels.RUN_ID}={run_id}"}
    kept = docker_client.containers.list(filters=wanted)
    assert len(kept) == 1 and kept[0].status == "running"

    # `ssebench runs` finds it, and its endpoint reaches the real daemon from this host.
    listed = json.loads(runs_command("list", "--json"))["runs"]
    assert [run["state"] for run in listed if run["run_id"] == run_id] == ["running"]
    url = json.loads(runs_command("endpoint", run_id, "4263", "--json"))["url"]
    with urllib.request.urlopen(f"{url}/version", timeout=10) as answer:
        assert answer.status == 200
        assert json.loads(answer.read())

    # Root's processes the checker's PID 1 started (the daemon, the MCP server) have the
    # runtime's PATH only; this exec, started by the engine, is not one of them, and PID 1's
    # /proc environ is what the engine started it with (it changed its own at once).
    found = kept[0].exec_run([contract.RUNTIME_PYTHON, "-I", "-c", ROOT_PATHS], user="root")
    assert found.exit_code == 0, found.output
    seen = found.output.decode().splitlines()
    assert seen and all(line.split(" ", 2)[2] == contract.ROOT_PATH for line in seen), seen

    runs_command("remove", run_id)
    assert leftovers(docker_client, run_id) == []


ROOT_PATHS = """
import os
procs = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        status = dict(
            line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line
        )
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
    except OSError:
        continue
    path = next((v[5:].decode() for v in environ if v.startswith(b"PATH=")), "-")
    procs[int(pid)] = (int(status["PPid"]), status["Uid"].split()[0], path)
for pid, (parent, uid, path) in sorted(procs.items()):
    while parent not in (0, 1):
        parent = procs.get(parent, (0,))[0]
    if uid == "0" and pid != 1 and parent == 1:
        print(pid, uid, path)
"""
"""Prints `PID 0 PATH` for each process of root that PID 1 started (and theirs)."""


def runs_command(*args: str) -> str:
    """`ssebench runs ARGS...`: its standard output; a failure fails the test."""
    done = subprocess.run(
        [*ssebench_argv(), "runs", *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"ssebench runs {' '.join(args)}: {done.stderr}"
    return done.stdout


def _wait_for_container(client: docker.DockerClient, run_id: str, deadline: float) -> None:
    wanted = {"label": f"{labels.RUN}={run_id}"}  # the agent's container carries the pair's
    while time.monotonic() < deadline:
        for container in client.containers.list(filters=wanted):
            if "sleeper agent: started" in container.logs().decode(errors="replace"):
                return
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} never started its agent")


def test_sigterm_to_the_cli_records_a_stopped_run_and_leaves_nothing(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    run_id = new_run_id("sigterm")
    argv = [*ssebench_argv(), "run", "--task", DEMO_TASKS[1], "--agent", "sleeper"]
    cli = subprocess.Popen(
        [*argv, "--run-id", run_id, "--timeout", "600"],
        cwd=tmp_path,
        env=run_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_container(docker_client, run_id, time.monotonic() + 900)
        cli.send_signal(signal.SIGTERM)
        _, stderr = cli.communicate(timeout=120)
        # What the CLI left, before this test removes anything: a check made after the
        # removal below could not fail.
        left = leftovers(docker_client, run_id)
    finally:
        if cli.poll() is None:
            cli.kill()
        remove_by_run_id(docker_client, run_id)

    run_dir = tmp_path / "results" / DEMO_TASKS[1] / "none" / "sleeper" / run_id
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["patch_result"]["status"] == "error", stderr
    assert "stopped" in (summary["patch_result"]["error_msg"] or ""), summary
    assert left == [], stderr


def test_failing_image_build_is_one_clear_error_and_no_run_directory(
    ssebench_run: RunCli,
) -> None:
    done = ssebench_run(DEMO_TASKS[1], "broken-build")

    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("ssebench: ")]
    assert len(errors) == 1, done.stderr
    # Four Dockerfile steps and the engine's LABEL steps for the inputs digest and the
    # registry (the second since issue 18).
    assert "agent broken-build layer" in errors[0] and "failed at step 3/6" in errors[0], errors
    assert not done.run_dir.parent.exists()


def test_an_agent_dockerfile_naming_the_case_image_is_one_clear_error_before_any_build(
    ssebench_run: RunCli,
) -> None:
    done = ssebench_run(DEMO_TASKS[1], "names-case-image")

    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("ssebench: ")]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith("ssebench: agent names-case-image: "), errors
    assert "Dockerfile line 4: `COPY --from=ssebench/case/demo/" in errors[0], errors
    assert "step" not in done.stderr, "no layer was built"
    assert not done.run_dir.parent.exists()
