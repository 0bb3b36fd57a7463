"""The lease and the reaper on a real engine: a killed CLI's run is reaped and recorded, a kept
run is never reaped unless asked, a container killed from outside is an infra_error."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from .helpers import (
    TASK,
    ours,
    remove_ours,
    run_env,
    ssebench_exe,
    start,
    summary_of,
    wait_running,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture
def workdir(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Path]:
    yield tmp_path
    remove_ours(docker_client, tmp_path / "results")


def ssebench(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ssebench_exe(), *args], cwd=cwd, env=run_env(), capture_output=True, text=True,
        timeout=1200, check=False,
    )  # fmt: skip


def orphaned_sleeper(workdir: Path, client: docker.DockerClient, prefix: str) -> tuple[str, int]:
    """A sleeper run whose CLI was SIGKILLed once its agent ran: its ID and the CLI's PID."""
    run_id = f"{prefix}-{secrets.token_hex(3)}"
    cli = start(workdir, "run", "--task", TASK, "--agent", "sleeper", "--run-id", run_id,
                "--timeout", "600")  # fmt: skip
    wait_running(client, run_id)
    os.killpg(cli.pid, signal.SIGKILL)
    cli.communicate()
    return run_id, cli.pid


def reap_records_it(workdir: Path, client: docker.DockerClient, run_id: str, cli_pid: int) -> None:
    """`runs reap` removes the sleeper run of a dead CLI, leaves nothing of it, and records
    it as infra_error naming that CLI."""
    reaped = ssebench(workdir, "runs", "reap", "--dir", "results", "--json")

    assert reaped.returncode == 0, reaped.stderr
    (entry,) = json.loads(reaped.stdout)
    assert (entry["run_id"], entry["action"], entry["recorded"]) == (run_id, "removed", True)
    assert ours(client, workdir / "results") == []
    summary = summary_of(workdir / "results" / TASK / "none" / "sleeper" / run_id)
    assert summary["outcome"] == "infra_error"
    assert (
        f"its runner (pid {cli_pid}) ended before recording" in summary["patch_result"]["error_msg"]
    )


def test_a_killed_cli_s_run_is_reaped_and_recorded_and_dry_run_changes_nothing(
    workdir: Path, docker_client: docker.DockerClient
) -> None:
    run_id, cli_pid = orphaned_sleeper(workdir, docker_client, "reap")
    results = workdir / "results"
    run_dir = results / TASK / "none" / "sleeper" / run_id
    assert ours(docker_client, results) != []
    assert not (run_dir / "summary.json").exists()

    dry = ssebench(workdir, "runs", "reap", "--dry-run", "--dir", "results", "--json")

    assert dry.returncode == 0, dry.stderr
    assert [entry["action"] for entry in json.loads(dry.stdout)] == ["would remove"]
    assert ours(docker_client, results) != []

    reap_records_it(workdir, docker_client, run_id, cli_pid)
    again = ssebench(workdir, "runs", "reap", "--dir", "results", "--json")
    assert json.loads(again.stdout) == []


def test_ssebench_run_reaps_its_own_orphans_at_start(
    workdir: Path, docker_client: docker.DockerClient
) -> None:
    orphan, cli_pid = orphaned_sleeper(workdir, docker_client, "orphan")

    done = ssebench(workdir, "run", "--task", TASK, "--agent", "dummy", "--json")

    assert done.returncode == 0, done.stderr
    assert f"removed run {orphan}, left by a runner that died (pid {cli_pid})" in done.stderr
    assert summary_of(workdir / "results" / TASK / "none" / "sleeper" / orphan)["outcome"] == (
        "infra_error"
    )
    assert ours(docker_client, workdir / "results") == []


def test_a_kept_run_is_never_reaped_unless_asked(
    workdir: Path, docker_client: docker.DockerClient
) -> None:
    run_id = f"kept-{secrets.token_hex(3)}"
    kept = ssebench(workdir, "run", "--task", TASK, "--agent", "dummy", "--run-id", run_id,
                    "--keep-container", "--json")  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    # Its runner has exited: only `keep` protects the run now.
    assert ours(docker_client, workdir / "results") != []

    untouched = ssebench(workdir, "runs", "reap", "--dir", "results", "--json")

    assert json.loads(untouched.stdout) == []
    assert ours(docker_client, workdir / "results") != []

    asked = ssebench(workdir, "runs", "reap", "--dir", "results", "--include-kept", "--json")

    (entry,) = json.loads(asked.stdout)
    # Its runner recorded it before exiting: the record stays as it was.
    assert (entry["run_id"], entry["action"], entry["recorded"]) == (run_id, "removed", False)
    assert ours(docker_client, workdir / "results") == []
    assert summary_of(workdir / "results" / TASK / "none" / "dummy" / run_id)["outcome"] == "failed"


def test_a_container_killed_from_outside_is_an_infra_error_and_one_line(
    workdir: Path, docker_client: docker.DockerClient
) -> None:
    run_id = f"killed-{secrets.token_hex(3)}"
    cli = start(workdir, "run", "--task", TASK, "--agent", "sleeper", "--run-id", run_id,
                "--timeout", "600")  # fmt: skip
    container = wait_running(docker_client, run_id)

    docker_client.api.kill(container)
    out, err = cli.communicate(timeout=300)

    assert cli.returncode == 1, err
    # stdout had the container's output only: no grade table for a run that says nothing.
    assert "run directory" not in out
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"ssebench: run {run_id} ended in infra_error: ")
    assert "exit status 137); SIGKILL ended it from outside the run" in last
    summary = summary_of(workdir / "results" / TASK / "none" / "sleeper" / run_id)
    assert summary["outcome"] == "infra_error"
    assert ours(docker_client, workdir / "results") == []


def test_a_run_directory_removed_under_the_run_is_recorded_anyway_as_an_infra_error(
    workdir: Path, docker_client: docker.DockerClient
) -> None:
    run_id = f"vanished-{secrets.token_hex(3)}"
    cli = start(workdir, "run", "--task", TASK, "--agent", "sleeper", "--run-id", run_id,
                "--timeout", "8")  # fmt: skip
    wait_running(docker_client, run_id)
    run_dir = workdir / "results" / TASK / "none" / "sleeper" / run_id
    shutil.rmtree(run_dir)

    _, err = cli.communicate(timeout=600)

    assert cli.returncode == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"ssebench: run {run_id} ended in infra_error: ")
    assert "the run directory vanished during the run" in last
    assert summary_of(run_dir)["outcome"] == "infra_error"
    assert ours(docker_client, workdir / "results") == []


def test_a_cli_killed_between_its_runs_volumes_and_containers_is_reaped_and_recorded(
    workdir: Path, docker_client: docker.DockerClient
) -> None:
    """The pair's volumes are made before its containers: a runner that dies in between
    leaves only them, which carry the run's lease, so the reaper finds, removes and
    records the run (the chaos tier met this once: a run directory without a summary
    and a source volume left behind)."""
    results = workdir / "results"
    for _ in range(12):
        run_id = f"halfway-{secrets.token_hex(3)}"
        cli = start(workdir, "run", "--task", TASK, "--agent", "sleeper", "--run-id", run_id,
                    "--timeout", "600")  # fmt: skip
        volume = f"ssebench-{run_id}-source"
        while cli.poll() is None:
            try:
                docker_client.api.inspect_volume(volume)
            except docker.errors.NotFound:
                continue
            os.killpg(cli.pid, signal.SIGKILL)
            break
        cli.communicate()
        # A request the CLI sent just before it died may still be carried out: let it land.
        time.sleep(2)
        started = docker_client.api.containers(
            all=True, filters={"label": f"ssebench.run={run_id}"}
        )
        if not started:
            break
        # Killed too late (its containers were made): another try.
        assert ssebench(workdir, "runs", "reap", "--dir", "results").returncode == 0
    else:
        pytest.fail("no try killed the CLI between its run's volumes and containers")
    run_dir = results / TASK / "none" / "sleeper" / run_id
    assert not (run_dir / "summary.json").exists()
    assert f"volume {volume}" in ours(docker_client, results)
    # `runs` shows it as made but not started, and says why it has no output.
    listed = json.loads(ssebench(workdir, "runs", "list", "--json").stdout)["runs"]
    assert [run["state"] for run in listed if run["run_id"] == run_id] == ["created"]
    said = ssebench(workdir, "runs", "logs", run_id)
    assert said.returncode == 1
    assert "its runner ended before making its containers" in said.stderr

    reap_records_it(workdir, docker_client, run_id, cli.pid)
