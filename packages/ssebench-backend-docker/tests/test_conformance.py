"""The Docker backend through the shared conformance suite (`ssebench.conformance`), on the engine.

The suite's checks, its probe image and the known failures live in the
ssebench-conformance package; this module only says how to make the backend
(the way the runner finds it) and the probe image (built FROM the base image).
"""

from __future__ import annotations

import docker
import pytest

from ssebench.backends.docker import DockerBackend
from ssebench.conformance import BackendFactory, conformance_tests
from ssebench.spec import get_backend

pytestmark = pytest.mark.docker


@pytest.fixture
def conformance_backend_factory(docker_client: docker.DockerClient) -> BackendFactory:
    return lambda: get_backend("docker")


test_conformance = conformance_tests(backend=DockerBackend, modes=("sandbox", "sidecar"))
