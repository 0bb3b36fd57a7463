"""Chaos: 12 runs through `ssebench eval -j 3` while CLIs are SIGKILLed, an evaluator is
killed and (when allowed) the Docker engine restarts, under those runs and a single
`ssebench run` (an infra_error, said in one line); afterwards every run directory has a
summary and, after `ssebench runs reap`, nothing of ours is left (issue 23).

Restarting the engine stops every container on it, also other people's: that step runs
only with SSEBENCH_CHAOS_ENGINE_RESTART=1, on an engine nobody else is using.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from ssebench.spec import labels

from ..limits.helpers import (
    HOME,
    TASK,
    ours,
    remove_ours,
    run_env,
    ssebench_exe,
    start,
    summary_of,
    wait_running,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3600)]

RUNS = 12
EVAL_ARGS = ("eval", "--tasks", TASK, "--agents", "dummy", "--repeat", str(RUNS), "-j", "3",
             "--retries", "4", "--timeout", "300")  # fmt: skip
ENGINE_RESTART = os.environ.get("SSEBENCH_CHAOS_ENGINE_RESTART") == "1"


@pytest.fixture
def workdir(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Path]:
    yield tmp_path
    remove_ours(docker_client, tmp_path / "results")


def running(client: docker.DockerClient, results: Path) -> list[str]:
    prefix = str(results.absolute()) + os.sep
    return [
        str(found["Id"])
        for found in client.api.containers(filters={"label": labels.RESULTS})
        if (found.get("Labels") or {}).get(labels.RESULTS, "").startswith(prefix)
    ]


def wait_for(what: str, check: object, seconds: float = 900) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def kill_cli(proc: subprocess.Popen[str]) -> str:
    """SIGKILL the CLI's whole session; what it wrote on stderr until then."""
    os.killpg(proc.pid, signal.SIGKILL)
    return proc.communicate()[1]


REAPED_AT_START = "left by a runner that died"


def evaluator_pid(
    client: docker.DockerClient, results: Path, runner: int
) -> tuple[int, str] | None:
    """The host PID of an evaluator grading a run of the runner `runner`, and the run's ID."""
    for container in running(client, results):
        try:
            top = client.api.top(container, ps_args="-eo pid,args")
            tags = client.api.inspect_container(container)["Config"]["Labels"]
        except docker.errors.APIError:
            continue
        if tags.get(labels.LEASE_PID) != str(runner):
            continue  # a run of the killed CLI: the reaper's, not its runner's
        run_id = tags[labels.RUN_ID]
        for pid, *args in top.get("Processes") or []:
            if "ssebench.daemon.evaluator" in " ".join(args):
                return int(pid), run_id
    return None


def restart_engine(client: docker.DockerClient) -> None:
    """Stop dockerd and start it again with the set-up script, as a crash and recovery."""
    pid = int(subprocess.run(["pgrep", "-xo", "dockerd"], capture_output=True, text=True,
                             check=True).stdout.split()[0])  # fmt: skip
    os.kill(pid, signal.SIGTERM)
    wait_for("dockerd to exit", lambda: not Path(f"/proc/{pid}").exists(), 120)
    subprocess.run([str(HOME / "scripts" / "setup-docker-engine.sh")], check=True, timeout=300)


@pytest.mark.parametrize(
    "engine_restart",
    [pytest.param(ENGINE_RESTART, id="restart" if ENGINE_RESTART else "no-restart")],
)
def test_chaos_loses_no_run_and_leaves_nothing_after_reap(
    workdir: Path, docker_client: docker.DockerClient, engine_restart: bool
) -> None:
    results = workdir / "results"
    kills = {"cli": 0, "evaluator": 0, "engine": 0}

    # 1. The first CLI dies with three runs in flight: they go on, unwatched.
    first = start(workdir, *EVAL_ARGS)
    wait_for("three runs in flight", lambda: len(running(docker_client, results)) >= 3)
    kill_cli(first)
    kills["cli"] += 1

    # 2. The same command again reaps them and goes on; an evaluator is killed; then this
    #    CLI dies too.
    second = start(workdir, *EVAL_ARGS)
    found: list[tuple[int, str]] = []

    def evaluator_found() -> bool:
        at_work = evaluator_pid(docker_client, results, second.pid)
        if at_work is not None:
            found.append(at_work)
        return at_work is not None

    wait_for("an evaluator at work", evaluator_found)
    evaluator, graded_run = found[-1]
    os.kill(evaluator, signal.SIGKILL)
    kills["evaluator"] += 1
    # Its runner, still alive, records it before this CLI dies too.
    graded_summary = results / TASK / "none" / "dummy" / graded_run / "summary.json"
    wait_for("the run whose evaluator was killed to be recorded", graded_summary.exists, 600)
    wait_for("runs in flight", lambda: len(running(docker_client, results)) >= 2)
    said = kill_cli(second)
    kills["cli"] += 1
    # The second CLI found the first one's runs in flight and reaped them.
    reaped_at_start = said.count(REAPED_AT_START)
    assert reaped_at_start >= 1, said[-3000:]
    left_after_kills = ours(docker_client, results)

    # 3. The engine restarts under a third CLI's runs and under a single `ssebench run`
    #    (only on an engine of our own): that run is an infra_error, said in one line.
    if engine_restart:
        single_id = f"restarted-{secrets.token_hex(3)}"
        single = start(workdir, "run", "--task", TASK, "--agent", "sleeper",
                       "--run-id", single_id, "--timeout", "600")  # fmt: skip
        wait_running(docker_client, single_id)
        third = start(workdir, *EVAL_ARGS)
        wait_for("runs in flight", lambda: len(running(docker_client, results)) >= 3)
        restart_engine(docker_client)
        kills["engine"] += 1
        _, single_said = single.communicate(timeout=600)
        assert single.returncode == 1, single_said[-3000:]
        single_line = single_said.strip().splitlines()[-1]
        assert single_line.startswith(f"ssebench: run {single_id} ended in infra_error: "), (
            single_line
        )
        single_dir = results / TASK / "none" / "sleeper" / single_id
        assert summary_of(single_dir)["outcome"] == "infra_error"
        print(f"chaos: the single run under the engine restart: {single_line}")
        reaped_at_start += third.communicate(timeout=1800)[1].count(REAPED_AT_START)

    # 4. The same command once more finishes the evaluation.
    last = subprocess.run(
        [ssebench_exe(), *EVAL_ARGS, "--json"], cwd=workdir, env=run_env(), capture_output=True,
        text=True, timeout=2400, check=False,
    )  # fmt: skip
    assert last.returncode == 0, last.stderr[-4000:]
    reaped_at_start += last.stderr.count(REAPED_AT_START)

    run_dirs = sorted(
        path for path in results.glob("*/*/*/*") if path.is_dir() and not path.is_symlink()
    )
    without_summary = [path.name for path in run_dirs if not (path / "summary.json").exists()]
    left_before = ours(docker_client, results)
    reaped = subprocess.run(
        [ssebench_exe(), "runs", "reap", "--dir", "results", "--json"], cwd=workdir,
        env=run_env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert reaped.returncode == 0, reaped.stderr
    left_after = ours(docker_client, results)
    (record,) = [json.loads(path.read_text()) for path in workdir.glob("evals/*/eval.json")]
    outcomes = [
        json.loads((results / TASK / "none" / "dummy" / slot["run_ids"][-1] / "summary.json")
                   .read_text())["outcome"]
        for slot in record["slots"]
    ]  # fmt: skip
    every = Counter(
        json.loads((path / "summary.json").read_text())["outcome"]
        for path in run_dirs
        if (path / "summary.json").exists()
    )
    print(
        f"chaos: {len(run_dirs)} run directories for {RUNS} runs ({dict(every)}); kills {kills}; "
        f"reaped by the CLIs at start {reaped_at_start}; left after the second kill "
        f"{len(left_after_kills)}; "
        f"without summary before reap {len(without_summary)}; leftovers before reap "
        f"{len(left_before)} {left_before}, after {len(left_after)}; reaped "
        f"{len(json.loads(reaped.stdout))}; final outcomes {outcomes}"
    )
    killed_grading = json.loads(graded_summary.read_text())
    print(f"chaos: the run whose evaluator was killed: {killed_grading['outcome']}, "
          f"{killed_grading['patch_result']['error_msg']}")  # fmt: skip
    assert killed_grading["outcome"] == "infra_error"
    assert without_summary == []
    assert left_after == []
    assert outcomes == ["failed"] * RUNS
