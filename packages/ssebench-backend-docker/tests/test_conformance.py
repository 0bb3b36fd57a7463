"""The Docker backend through the shared conformance suite (`ssebench.conformance`), on the engine.

The suite's checks, its probe image and the known failures live in the
ssebench-conformance package; this module only says how to make the backend
(the way the runner finds it) and the probe image (built FROM the base image).
"""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from ssebench.backends.docker import DockerBackend
from ssebench.conformance import BackendFactory, ProbeImageFactory, conformance_tests
from ssebench.spec import get_backend

pytestmark = pytest.mark.docker

PROBE_TAG = "ssebench-test/probe:conformance"


@pytest.fixture
def conformance_backend_factory(docker_client: docker.DockerClient) -> BackendFactory:
    return lambda: get_backend("docker")


@pytest.fixture
def conformance_probe_image_factory(
    docker_client: docker.DockerClient, base_image: str
) -> ProbeImageFactory:
    def build(context: Path) -> str:
        docker_client.images.build(
            path=str(context),
            tag=PROBE_TAG,
            buildargs={"SSEBENCH_BASE_IMAGE": base_image},
            rm=True,
            pull=False,
        )
        return PROBE_TAG

    return build


test_conformance = conformance_tests(backend=DockerBackend)
