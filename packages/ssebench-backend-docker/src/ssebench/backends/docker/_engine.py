"""The one place the docker SDK's client is made and its errors become SSEBench's."""

from __future__ import annotations

import docker
import docker.errors
from ssebench.spec import BackendError

SETUP_HINT = "start one with scripts/setup-docker-engine.sh (as root), or set DOCKER_HOST"


def docker_client() -> docker.DockerClient:
    """A client of the engine the environment names (DOCKER_HOST, else the local socket).

    Raises:
        BackendError: no engine answers.
    """
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise BackendError(f"no Docker engine answers ({exc}); {SETUP_HINT}") from exc
    return client


def image_exists(client: docker.DockerClient, name: str) -> bool:
    """Whether the engine has an image of that name (nothing is pulled)."""
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError as exc:
        raise BackendError(f"cannot ask the Docker engine about image {name}: {exc}") from exc
    return True
