"""The Docker backend through the shared conformance suite (`ssebench.conformance`), on the engine.

The suite's checks, its probe image and the known failures live in the
ssebench-conformance package; this module only says how to make the backend
(the way the runner finds it) and the probe image (built FROM the base image).
"""

from __future__ import annotations

import docker
import pytest

from ssebench.backends.docker import DockerBackend, DockerRunHandle
from ssebench.conformance import BackendFactory, conformance_tests
from ssebench.spec import get_backend, labels

pytestmark = pytest.mark.docker


def _left_of(client: docker.DockerClient, handle: DockerRunHandle) -> list[str]:
    """The engine's objects of a run: its containers (of the pair too), network and volumes."""
    wanted = [f"{labels.RUN_ID}={handle.run_id}"]
    if handle.pair is not None:
        wanted.append(f"{labels.RUN}={handle.pair}")
    found = set()
    for label in wanted:
        containers = client.containers.list(all=True, filters={"label": label})
        found |= {f"container {c.name}" for c in containers}
        found |= {f"volume {v.name}" for v in client.volumes.list(filters={"label": label})}
    if handle.network is not None:
        networks = client.networks.list(names=[handle.network])  # a name filter also finds parts
        found |= {f"network {n.name}" for n in networks if n.name == handle.network}
    return sorted(found)


@pytest.fixture
def conformance_backend_factory(docker_client: docker.DockerClient) -> BackendFactory:
    """The backend as the runner finds it, whose `cleanup` is checked at once against the
    engine (the suite sees only `list_runs`): nothing of a run that was not kept remains,
    in sidecar mode its two volumes included."""

    def make() -> DockerBackend:
        backend = get_backend("docker")
        assert isinstance(backend, DockerBackend)
        cleanup = backend.cleanup

        def checked(handle: DockerRunHandle) -> None:
            cleanup(handle)
            if not handle.keep:
                assert _left_of(docker_client, handle) == [], f"cleanup of {handle.run_id} left"

        backend.cleanup = checked  # type: ignore[method-assign]
        return backend

    return make


test_conformance = conformance_tests(backend=DockerBackend, modes=("sandbox", "sidecar"))
