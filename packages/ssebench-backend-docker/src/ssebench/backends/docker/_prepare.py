"""The images of one run: every layer built locally, or the published ones.

Built locally: case -> runtime -> tool (the image builders), then the agent
layer `<registry>/agent-<agent>/<task>:<agent version>`: the agent's Dockerfile
(checked before anything is built) on the tool layer without its hidden
material, sealed with SSEBench's own paths (`_agent_layer.py`); its CMD is the
agent command.
"""

from __future__ import annotations

import sys

import docker
from ssebench.backends.docker._agent_dockerfile import check_agent_dockerfile
from ssebench.backends.docker._agent_layer import build_agent
from ssebench.backends.docker._build import BuildLine
from ssebench.backends.docker._engine import image_exists
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._layers import build_tool_images
from ssebench.spec import (
    ImageRequest,
    Images,
    ImageUnavailableError,
    find_home,
    prebuilt_images,
)


class StepPrinter:
    """Shows builds on stderr, one line a step, marked `(cached)` when the cache served it,
    or one line for a layer that was up to date.

    The engine says a step came from the cache only on the line after the one
    starting it, so a step's line waits for the next line of the log.
    """

    def __init__(self) -> None:
        self._pending: BuildLine | None = None

    def __call__(self, line: BuildLine) -> None:
        if line.reused:
            self.flush()
            self._print(f"{line.layer}: up to date")
            return
        if line.step is not None and line.step.cached:
            self._pending = None
            self._print(f"{line.layer}: {line.step} (cached)")
            return
        self.flush()
        if line.step is not None:
            self._pending = line

    def flush(self) -> None:
        """Show the step still waiting for its next line."""
        if self._pending is not None:
            self._print(f"{self._pending.layer}: {self._pending.step}")
            self._pending = None

    @staticmethod
    def _print(text: str) -> None:
        print(text, file=sys.stderr, flush=True)


def _published(client: docker.DockerClient, request: ImageRequest) -> Images:
    images = prebuilt_images(request)
    if not image_exists(client, images.agent):
        # Whatever stops the pull, the run has no image: ImageUnavailableError.
        with engine_errors(f"pulling {images.agent}", family=ImageUnavailableError):
            client.images.pull(images.agent, platform=request.platform)
    return images


def prepare_run_images(client: docker.DockerClient, request: ImageRequest) -> Images:
    """The images of a sandbox run, built (or, with `prebuilt`, pulled) as needed.

    Raises:
        ImageUnavailableError: sidecar mode; the agent's Dockerfile breaks the rule of
            `_agent_dockerfile.py` (checked before anything is built); a build failed
            (naming the layer and the step); or a published image cannot be pulled.
        BackendError: the engine cannot be reached.
    """
    if request.mode != "sandbox":
        raise ImageUnavailableError("the docker backend builds sandbox images only for now")
    if request.prebuilt:
        return _published(client, request)
    check_agent_dockerfile(request.agent)
    home = find_home()
    printer = StepPrinter()
    try:
        build_tool_images(client, [request.task], home, progress=printer)
        return Images(agent=build_agent(client, request.agent, request.task, home, printer).tag)
    finally:
        printer.flush()
