"""The gateway's image for a cluster: built here, pushed to `SSEBENCH_REGISTRY` like run images.

`ssebench proxy up --backend k8s` deploys the image by digest, so the cluster runs
exactly what was built from this checkout's lock and hooks, even when the tag (the
lock's digest only) was pushed before with other hooks.
"""

from __future__ import annotations

from pathlib import Path

import docker
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._gateway_image import build_gateway_image
from ssebench.backends.docker._prepare import split_tag
from ssebench.backends.docker._publish import (
    Say,
    _local_digests,
    _push,
    _registry_digest,
    push_registry,
)
from ssebench.spec import ImageUnavailableError


def publish_gateway(client: docker.DockerClient, home: Path, say: Say) -> str:
    """Build (or reuse) the gateway's image and push it unless the registry holds it.

    Returns:
        `repository@sha256:...`, the reference a pod pulls.

    Raises:
        UserError: `SSEBENCH_REGISTRY` is a local prefix, not a registry host.
        ImageUnavailableError: the build or the push failed.
        BackendError: the engine cannot be reached.
    """
    push_registry()
    built = build_gateway_image(client, home, progress=lambda line: say(line.text))
    repository, tag = split_tag(built.tag)
    with engine_errors(f"inspecting the image {built.tag}", family=ImageUnavailableError):
        image = client.images.get(built.tag)
    remote = _registry_digest(client, built.tag)
    if remote is not None and remote in _local_digests(image, repository):
        say(f"{built.tag}: up to date in the registry ({remote})")
        digest = remote
    else:
        say(f"{built.tag}: pushing")
        digest = _push(client, repository, tag, built.tag, say)
    return f"{repository}@{digest}"
