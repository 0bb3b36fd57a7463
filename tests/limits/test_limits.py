"""A fork bomb and a memory hog stay inside their run: the host answers, the run is graded,
and a run beside them passes (issue 23, part 1)."""

from __future__ import annotations

import json
import os
import secrets
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from .helpers import TASK, remove_ours, start, summary_of

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.alone, pytest.mark.timeout(2400)]

PROBE_ROUNDS = 15


def probe_once() -> float:
    """One host probe: start a process and write, sync and read a small file, in seconds."""
    started = time.perf_counter()
    subprocess.run(["/bin/true"], check=True)
    path = Path(f"/var/tmp/i-probe-{os.getpid()}")
    path.write_bytes(os.urandom(4096))
    path.read_bytes()
    path.unlink()
    return time.perf_counter() - started


def probe() -> float:
    """The host's latency: the median of a few probes, so one scheduler hiccup does not count."""
    return statistics.median(probe_once() for _ in range(PROBE_ROUNDS))


def available_memory() -> int:
    """MemAvailable of /proc/meminfo, in bytes (free memory plus what the cache would give)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.fixture
def results(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Path]:
    yield tmp_path
    remove_ours(docker_client, tmp_path / "results")


def test_a_fork_bomb_and_a_memory_hog_cannot_hurt_the_host_or_a_run_beside_them(
    results: Path,
) -> None:
    assert available_memory() > 4 * 1024**3, (
        "needs 4 GiB free: the memory hog is held to 256 MiB, the reference run to its default"
    )
    before = probe()
    tag = secrets.token_hex(3)
    runs = {
        # Limits small enough that neither can hurt a shared machine even if one failed.
        "forkbomb": ("--pids-limit", "128", "--cpus", "0.5", "--memory", "512m"),
        "memhog": ("--memory", "256m", "--cpus", "0.5"),
        "reference": (),
    }
    procs = {
        agent: start(
            results,
            "run",
            "--task",
            TASK,
            "--agent",
            agent,
            "--run-id",
            f"lim-{agent}-{tag}",
            "--json",
            "--timeout",
            "300",
            *options,
        )
        for agent, options in runs.items()
    }
    during = []
    while any(proc.poll() is None for proc in procs.values()):
        during.append(probe())
        time.sleep(0.5)
    outputs = {agent: proc.communicate() for agent, proc in procs.items()}

    def run_dir(agent: str) -> Path:
        return results / "results" / TASK / "none" / agent / f"lim-{agent}-{tag}"

    for agent, (out, err) in outputs.items():
        assert procs[agent].returncode == 0, f"{agent}: {err[-3000:]}"
        assert json.loads(out)["run_id"] == f"lim-{agent}-{tag}"
    bomb, hog, reference = (summary_of(run_dir(agent)) for agent in runs)
    # Graded, not `error`: the agent's trouble stayed the agent's.
    assert bomb["patch_result"]["status"] == "failed", bomb["patch_result"]
    assert hog["patch_result"]["status"] == "failed", hog["patch_result"]
    assert reference["patch_result"]["status"] == "passed", reference["patch_result"]
    # The hog, not a root service, met the OOM killer (128 + SIGKILL), and the limits
    # each run asked for are recorded.
    assert hog["runtime_result"]["agent_exit_code"] == 137
    assert hog["config"]["resources"] == {"cpus": 0.5, "memory": 256 * 1024**2, "pids": 1024}
    assert bomb["config"]["resources"]["pids"] == 128
    # The bomb filled its container's process limit (the launcher holds one of the 128)
    # and the launcher killed what was left of it once the agent exited.
    agent_log = next(run_dir("forkbomb").glob("agent.log")).read_text()
    counted = int(agent_log.split("forkbomb agent: ")[2].split()[0])
    assert 100 <= counted <= 128, agent_log
    assert "process(es) it left behind" in agent_log, agent_log
    for agent in ("forkbomb", "memhog"):
        assert f"{agent} agent: oom_score_adj 1000" in (run_dir(agent) / "agent.log").read_text()
    ratio = max(statistics.median(during), 1e-9) / before
    print(f"host probe: {before * 1000:.2f} ms before, {statistics.median(during) * 1000:.2f} "
          f"ms during (median of {len(during)}), ratio {ratio:.2f}")  # fmt: skip
    assert ratio <= 5, f"the host slowed down {ratio:.1f}x during the runs"
