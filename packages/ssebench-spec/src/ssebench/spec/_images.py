"""Which images a run needs, and the names of published (prebuilt) images."""

from __future__ import annotations

import os
from typing import Final

from ssebench.spec import settings
from ssebench.spec._base import Message
from ssebench.spec._errors import ImageUnavailableError
from ssebench.spec._run import Mode
from ssebench.spec._task import Agent, Task
from ssebench.spec._tool_layers import ToolLayer
from ssebench.spec.catalog import CaseSource

REGISTRY_ENV: Final = settings.REGISTRY.name
"""Environment variable naming the prefix of every SSEBench image."""

DEFAULT_REGISTRY: Final = settings.REGISTRY.default
"""A local prefix: nothing is pulled unless a run asks for prebuilt images."""

BASE_IMAGE_ENV: Final = settings.BASE_IMAGE.name
"""Environment variable naming the image every case image is built FROM."""

DEFAULT_BASE_IMAGE: Final = settings.BASE_IMAGE.default
"""The base image; bootstrapped from Debian packages when missing, never pulled."""


def registry() -> str:
    """The image name prefix in force (`SSEBENCH_REGISTRY`, default `ssebench`)."""
    return os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY


def base_image() -> str:
    """The base image in force (`SSEBENCH_BASE_IMAGE`, default `debian:bookworm-slim`)."""
    return os.environ.get(BASE_IMAGE_ENV) or DEFAULT_BASE_IMAGE


def runtime_version() -> str:
    """The ssebench-daemon version that tool and sidecar images are tagged with.

    Raises:
        ImageUnavailableError: ssebench-daemon is not installed.
    """
    from importlib import metadata  # here: it costs start-up time where it is not needed

    try:
        return metadata.version("ssebench-daemon")
    except metadata.PackageNotFoundError as exc:
        raise ImageUnavailableError(
            "ssebench-daemon is not installed, so the runtime version is unknown"
        ) from exc


class ImageRequest(Message, kw_only=True, frozen=True):
    """What `Backend.prepare_images` is asked for."""

    mode: Mode
    task: Task
    agent: Agent
    prebuilt: bool = False
    platform: str | None = None
    case: CaseSource | None = None
    """For a task from a catalog: where its case image comes from (pull, or build from its
    folder if that matches the catalog); None: build it from `task.folder` as it is."""
    tool_layer: ToolLayer | None = None
    """The tool layer of a sandbox run built here (`--tool-layer`); None is the built-in
    `sandbox` layer. Never set in sidecar mode or with `prebuilt`."""


class Images(Message, kw_only=True, frozen=True):
    """The images of one run.

    `agent` is the agent container's image (the agent on the open tool layer in
    sandbox mode, on the task-independent runtime base in sidecar mode);
    `environment` is the checker's, the task's tool image (`tool/<task>`, or the
    `--tool-layer` built, in sandbox mode; `tool-sidecar/<task>` in sidecar mode).
    A backend that runs a sandbox run in one container gives none.
    """

    agent: str
    environment: str | None = None

    def task_image(self) -> str:
        """The image holding the task's hidden material."""
        return self.environment or self.agent


def prebuilt_images(request: ImageRequest) -> Images:
    """The published images a prebuilt run uses, under `SSEBENCH_REGISTRY`.

    Raises:
        ImageUnavailableError: sidecar mode without ssebench-daemon installed.
    """
    prefix = registry()
    agent = request.agent
    task_id = request.task.id.lower()
    if request.mode == "sandbox":
        return Images(
            agent=f"{prefix}/agent-{agent.name}/{task_id}:{agent.version}",
            environment=f"{prefix}/tool/{task_id}:{runtime_version()}",
        )
    return Images(
        agent=f"{prefix}/agent-{agent.name}/sidecar:{agent.version}",
        environment=f"{prefix}/tool-sidecar/{task_id}:{runtime_version()}",
    )
