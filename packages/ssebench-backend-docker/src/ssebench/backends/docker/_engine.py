"""The one place the docker SDK's client is made."""

from __future__ import annotations

import docker
from ssebench.backends.docker._errors import engine_errors
from ssebench.spec import (
    ImageUnavailableError,
    PlatformNotFoundError,
    PlatformUnavailableError,
    SSEBenchError,
)

SETUP_HINT = "start one with scripts/setup-docker-engine.sh (as root), or set DOCKER_HOST"


def docker_client() -> docker.DockerClient:
    """A client of the engine the environment names (DOCKER_HOST, else the local socket).

    Raises:
        PlatformUnavailableError: no engine answers (a BackendError); the message says how
            to start one.
    """
    try:
        with engine_errors("reaching the Docker engine"):
            client = docker.from_env()
            client.ping()
    except SSEBenchError as exc:
        # Whatever the SDK said (no socket, a bad DOCKER_HOST), the cure is the same.
        raise PlatformUnavailableError(f"{exc}; {SETUP_HINT}") from exc
    return client


def image_exists(client: docker.DockerClient, name: str) -> bool:
    """Whether the engine has an image of that name (nothing is pulled).

    Raises:
        BackendError: the engine cannot be asked.
    """
    try:
        with engine_errors(f"asking the Docker engine about image {name}"):
            client.images.get(name)
    except (PlatformNotFoundError, ImageUnavailableError):
        return False
    return True
