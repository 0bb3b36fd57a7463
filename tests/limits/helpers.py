"""What the limits, reaper and chaos tests share: `ssebench` as a process, our runs' leftovers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import docker

from ssebench.spec import labels

HOME = Path(__file__).resolve().parents[2]
TEST_AGENTS = HOME / "tests" / "agents"
TASK = "tlvkit-heap-overflow"


def ssebench_exe() -> str:
    """The installed `ssebench` command of this environment."""
    script = Path(sys.executable).with_name("ssebench")
    return str(script if script.exists() else shutil.which("ssebench") or "ssebench")


def run_env() -> dict[str, str]:
    return {**os.environ, "SSEBENCH_AGENT_PATH": str(TEST_AGENTS), "SSEBENCH_HOME": str(HOME)}


def start(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """`ssebench ARGS` in `cwd`, in its own session, output kept."""
    return subprocess.Popen(
        [ssebench_exe(), *args],
        cwd=cwd,
        env=run_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def ours(client: docker.DockerClient, results: Path) -> list[str]:
    """Every container and network of the runs recorded under `results` (by their labels),
    and every volume carrying one of their run IDs: nothing of another helper's runs."""
    prefix = str(results.absolute()) + os.sep
    found, run_ids = [], set()
    for summary in client.api.containers(all=True, filters={"label": labels.RESULTS}):
        tags = summary.get("Labels") or {}
        if tags.get(labels.RESULTS, "").startswith(prefix):
            found.append(f"container {summary['Names'][0].lstrip('/')}")
            run_ids.add(tags.get(labels.RUN_ID, ""))
    run_ids |= {path.name for path in results.glob("*/*/*/*") if path.is_dir()}
    for network in client.api.networks(filters={"label": labels.RUN_ID}):
        if (network.get("Labels") or {}).get(labels.RUN_ID) in run_ids:
            found.append(f"network {network['Name']}")
    volumes = client.api.volumes(filters={"label": labels.RUN_ID}).get("Volumes") or []
    found += [
        f"volume {v['Name']}"
        for v in volumes
        if (v.get("Labels") or {}).get(labels.RUN_ID) in run_ids
    ]
    return sorted(found)


def remove_ours(client: docker.DockerClient, results: Path) -> None:
    """Remove what `ours` finds (a test's own clean-up)."""
    prefix = str(results.absolute()) + os.sep
    for summary in client.api.containers(all=True, filters={"label": labels.RESULTS}):
        if (summary.get("Labels") or {}).get(labels.RESULTS, "").startswith(prefix):
            client.api.remove_container(summary["Id"], force=True, v=True)
    run_ids = {path.name for path in results.glob("*/*/*/*") if path.is_dir()}
    for network in client.api.networks(filters={"label": labels.RUN_ID}):
        if (network.get("Labels") or {}).get(labels.RUN_ID) in run_ids:
            client.api.remove_network(network["Id"])
    for volume in client.api.volumes(filters={"label": labels.RUN_ID}).get("Volumes") or []:
        if (volume.get("Labels") or {}).get(labels.RUN_ID) in run_ids:
            client.api.remove_volume(volume["Name"], force=True)


def summary_of(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return data


def wait_running(client: docker.DockerClient, run_id: str, seconds: float = 900) -> str:
    """The ID of the run's checker (the container with its ID label) once its agent, in
    the other container of the pair, runs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        checker = client.api.containers(filters={"label": f"{labels.RUN_ID}={run_id}"})
        for found in client.api.containers(filters={"label": f"{labels.RUN}={run_id}"}):
            logs = client.api.logs(found["Id"]).decode(errors="replace")
            if checker and "sleeper agent: started" in logs:
                return str(checker[0]["Id"])
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not start its agent in {seconds}s")
