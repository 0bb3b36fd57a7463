"""How the Docker backend keeps a restricted run off every network until `endpoint` is asked.

What every backend must show about egress is in the conformance suite; this is
the Docker backend's own way of doing it: no network at first, then an
internal network of its own, labelled with the run, removed by cleanup.
"""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from ssebench.backends.docker import DockerRunHandle
from ssebench.conformance import Harness, Suite
from ssebench.spec import contract, get_backend, labels

pytestmark = pytest.mark.docker


def test_a_restricted_run_has_no_network_until_its_endpoint_is_asked_for(
    docker_client: docker.DockerClient, probe_image: str, tmp_path: Path
) -> None:
    backend = get_backend("docker")
    with Harness(backend, Suite(lambda _: probe_image), tmp_path) as h:
        _, handle = h.start("serve", egress="restricted")
        assert isinstance(handle, DockerRunHandle) and handle.network
        container = docker_client.containers.get(handle.container_id)
        assert list(container.attrs["NetworkSettings"]["Networks"]) == ["none"]
        assert docker_client.networks.list(names=[handle.network]) == []

        url = backend.endpoint(handle, contract.DAEMON_PORT)
        network = docker_client.networks.get(handle.network)
        assert network.attrs["Internal"] is True
        assert network.attrs["Labels"][labels.RUN_ID] == handle.run_id
        assert network.attrs["Options"]["com.docker.network.bridge.name"].startswith("sseb-")
        container.reload()
        assert list(container.attrs["NetworkSettings"]["Networks"]) == [handle.network]
        assert backend.endpoint(handle, contract.DAEMON_PORT) == url, "asked again: the same URL"

        backend.stop(handle, grace=1)
        backend.cleanup(handle)
        assert docker_client.networks.list(names=[handle.network]) == []
