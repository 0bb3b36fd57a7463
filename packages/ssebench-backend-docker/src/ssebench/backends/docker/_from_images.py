"""Nothing is pulled: every image a Dockerfile's FROM names must be on this machine.

The classic builder fetches a FROM image that is missing locally even with
`pull=False` (that option only forces a fresh pull of images it has), so a
task whose Dockerfile names some registry's image would send the engine
there. Before a build is sent, each FROM is resolved the way the builder
resolves it (ARG defaults before the first FROM, then the build's arguments)
and looked up in the engine; a missing one is a clear error naming it, and
no build is sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import docker
from ssebench.backends.docker._errors import engine_errors
from ssebench.spec import (
    ImageUnavailableError,
    PlatformNotFoundError,
    base_image,
    from_lines,
)

_VARIABLE: Final = re.compile(r"\$(?:\{(\w+)(?::([-+])([^}]*))?\}|(\w+))")


def substitute(text: str, values: Mapping[str, str]) -> str:
    """`text` with `$NAME`, `${NAME}`, `${NAME:-default}` and `${NAME:+word}` replaced."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(4)
        value = values.get(name, "")
        if match.group(2) == "-":
            return value or match.group(3)
        if match.group(2) == "+":
            return match.group(3) if value else ""
        return value

    return _VARIABLE.sub(one, text)


class MissingFromImageError(ImageUnavailableError):
    """An image a FROM names is not on this machine (no build was sent)."""


def _exists(client: docker.DockerClient, image: str) -> bool:
    try:
        with engine_errors(f"inspecting the image {image}"):
            client.images.get(image)
    except (ImageUnavailableError, PlatformNotFoundError):
        return False
    return True


def require_from_images(
    client: docker.DockerClient,
    *,
    layer: str,
    dockerfile: Path,
    buildargs: Mapping[str, str],
) -> None:
    """Make sure every image the Dockerfile's FROMs name is on this machine.

    Raises:
        MissingFromImageError: one is not (or cannot be told); one line naming the
            layer, the Dockerfile's line and the image, and the way to a base image.
        BackendError: the engine cannot be reached.
    """
    try:
        text = dockerfile.read_text(errors="replace")
    except OSError:
        return  # the engine reports a missing Dockerfile itself
    defaults, froms = from_lines(text)
    values = {**defaults, **buildargs}
    stages: set[str] = set()
    for line in froms:
        image = substitute(line.image, values)
        known = image.lower() in {"scratch", *stages}
        if not known and (not image or not _exists(client, image)):
            shown = image or f"{line.image} (empty)"
            raise MissingFromImageError(
                f"{layer} layer: {dockerfile.name} line {line.number}: FROM {shown} is "
                "not on this machine, and SSEBench never pulls; start from the base image "
                f"with `ARG SSEBENCH_BASE_IMAGE` and `FROM ${{SSEBENCH_BASE_IMAGE}}` (now "
                f"{base_image()}, set by SSEBENCH_BASE_IMAGE), or put {shown} on this "
                "machine yourself"
            )
        if line.stage:
            stages.add(line.stage.lower())
