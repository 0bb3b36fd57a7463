"""`DockerBackend.probe_image`: one command in a throwaway container, as `model`, no network."""

from __future__ import annotations

from collections.abc import Sequence

import docker
from ssebench.backends.docker._errors import engine_errors
from ssebench.spec import contract, labels


def probe_image(
    client: docker.DockerClient,
    image: str,
    argv: Sequence[str],
    env: dict[str, str],
    timeout: float,
) -> bytes:
    """See `Backend.probe_image`."""
    with engine_errors(f"looking inside {image}"):
        container = client.containers.create(
            image,
            entrypoint=list(argv),
            command=[],
            user=f"{contract.MODEL_UID}:{contract.MODEL_UID}",
            environment=env,
            network_disabled=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            labels={labels.PREFIX + "probe": "true"},
            working_dir="/",
        )
        try:
            container.start()
            # A wait past `timeout` leaves as PlatformTimeoutError (engine_errors).
            container.wait(timeout=timeout)
            output: bytes = container.logs(stdout=True, stderr=False)
        finally:
            container.remove(force=True)
    return output
