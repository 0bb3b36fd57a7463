"""The images of one run: every layer built locally, or the published ones.

Built locally: case -> runtime -> tool (the image builders), then the agent
layer `<registry>/agent-<agent>/<task>:<agent version>` FROM the tool layer
with the agent's folder as its context, its CMD the agent command.
"""

from __future__ import annotations

import sys
from pathlib import Path

import docker
from ssebench.backends.docker._build import (
    BuildLine,
    BuiltImage,
    Progress,
    build_layer,
    inputs_digest,
    no_progress,
)
from ssebench.backends.docker._engine import image_exists
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._layers import build_tool_images, local_image_id, tool_image_name
from ssebench.spec import (
    Agent,
    ImageRequest,
    Images,
    ImageUnavailableError,
    Task,
    find_home,
    prebuilt_images,
    registry,
)


def agent_image_name(agent: Agent, task: Task) -> str:
    """The agent layer's name: `<registry>/agent-<agent>/<task>:<agent version>`."""
    return f"{registry()}/agent-{agent.name}/{task.id.lower()}:{agent.version}"


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


def build_agent(
    client: docker.DockerClient, agent: Agent, task: Task, progress: Progress = no_progress
) -> BuiltImage:
    """Build the agent layer on the task's tool layer (which must exist)."""
    tool = tool_image_name(task)
    tool_id = local_image_id(client, tool, "build it first (`ssebench images build-tool`)")
    return build_layer(
        client,
        layer=f"agent {agent.name}",
        tag=agent_image_name(agent, task),
        context=Path(agent.folder),
        buildargs={"TOOL_IMAGE": tool},
        inputs=inputs_digest([tool_id], Path(agent.folder)),
        progress=progress,
    )


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
        ImageUnavailableError: sidecar mode; a build failed (naming the layer and the
            step); or a
            published image cannot be pulled.
        BackendError: the engine cannot be reached.
    """
    if request.mode != "sandbox":
        raise ImageUnavailableError("the docker backend builds sandbox images only for now")
    if request.prebuilt:
        return _published(client, request)
    printer = StepPrinter()
    try:
        build_tool_images(client, [request.task], find_home(), progress=printer)
        return Images(agent=build_agent(client, request.agent, request.task, printer).tag)
    finally:
        printer.flush()
