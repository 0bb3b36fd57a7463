"""A run's limits reach the engine: CPU quota, memory with no swap beyond it, processes."""

from __future__ import annotations

import secrets
from pathlib import Path

import docker
import pytest

from ssebench.backends.docker import DockerBackend
from ssebench.spec import Mount, Resources, RunSpec, contract, labels

pytestmark = pytest.mark.docker


def spec_for(image: str, folder: Path, resources: Resources | None) -> RunSpec:
    run_id = f"limits-{secrets.token_hex(4)}"
    (folder / "archive").mkdir()
    return RunSpec(
        run_id=run_id,
        task_name="probe-task",
        mode="sandbox",
        image=image,
        env={"PROBE_MODE": "talk"},
        results=Mount(target=contract.RESULTS_DIR, source=str(folder)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(folder / "archive")),
        labels={labels.RUN_ID: run_id},
        timeout=60,
        resources=resources,
    )


def test_the_runs_limits_are_set_on_its_container(
    docker_client: docker.DockerClient, probe_image: str, tmp_path: Path
) -> None:
    limits = Resources(cpus=0.5, memory=256 * 1024**2, pids=64)
    backend = DockerBackend()
    handle = backend.start(spec_for(probe_image, tmp_path, limits))
    try:
        assert backend.wait(handle, timeout=60) == 0
        config = docker_client.api.inspect_container(handle.container_id)["HostConfig"]
        assert config["NanoCpus"] == 500_000_000
        assert config["Memory"] == 256 * 1024**2
        assert config["MemorySwap"] == 256 * 1024**2  # no swap beyond the memory limit
        assert config["PidsLimit"] == 64
    finally:
        backend.remove(handle)


def test_a_run_without_limits_gets_the_engine_s_own(
    docker_client: docker.DockerClient, probe_image: str, tmp_path: Path
) -> None:
    backend = DockerBackend()
    handle = backend.start(spec_for(probe_image, tmp_path, None))
    try:
        assert backend.wait(handle, timeout=60) == 0
        config = docker_client.api.inspect_container(handle.container_id)["HostConfig"]
        assert (config["NanoCpus"], config["Memory"]) == (0, 0)
        assert config["PidsLimit"] in (None, 0, -1)
    finally:
        backend.remove(handle)
