"""The two image layers of sidecar mode (docs/architecture.md):

    sidecar-agent  <registry>/sidecar-agent:<daemon version>   images/sidecar-agent/ on
                   the base image and the runtime: the users, folders and entrypoint
                   of a tool layer, and no task at all
    agent          <registry>/agent-<agent>/sidecar:<agent version>   the agent's own
                   Dockerfile on sidecar-agent, sealed (images/tool/seal.Dockerfile)
    tool-sidecar   <registry>/tool-sidecar/<task>:<daemon version>   images/sidecar-case/
                   on the task's tool layer: PID 1 runs the daemon only

The agent layer depends on no task, so one image serves a whole dataset: a second
task's run finds it current by its inputs digest and sends the engine no build.
Its rule is the sandbox agent layer's (`_agent_layer.py`): the agent's Dockerfile is
checked first, runs where no hidden material is (here: no task at all), and the
seal puts SSEBench's paths back and sweeps the image before anything runs as root.
"""

from __future__ import annotations

import functools
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Final

import docker
from ssebench.backends.docker._agent_dockerfile import check_agent_dockerfile
from ssebench.backends.docker._agent_layer import check_agent_stage
from ssebench.backends.docker._agent_packages import (
    agent_context,
    packages_inputs,
    prepare_packages,
)
from ssebench.backends.docker._build import (
    DAEMON_LABEL,
    BuildLine,
    BuiltImage,
    Progress,
    build_layer,
    inputs_digest,
    no_progress,
)
from ssebench.backends.docker._layers import (
    TOOL_FOLDER,
    _normalized,
    local_image_id,
    runtime_image_name,
    tool_image_name,
)
from ssebench.spec import Agent, Task, base_image, registry, runtime_version

SIDECAR_AGENT_FOLDER: Final = Path("images") / "sidecar-agent"
"""The sidecar agent base's Dockerfile and the seal's, relative to the home."""

SIDECAR_CASE_FOLDER: Final = Path("images") / "sidecar-case"
"""The task container's Dockerfile, relative to the home."""

SETUP_SCRIPT: Final = "setup.py"
"""The tool layer's set-up script (in images/tool/), which sidecar images use too."""

SEAL_DOCKERFILE: Final = "seal.Dockerfile"
"""The agent images' seal (both modes), in the tool layer's folder."""


def sidecar_agent_base_name() -> str:
    """`<registry>/sidecar-agent:<ssebench-daemon version>`."""
    return f"{registry()}/sidecar-agent:{runtime_version()}"


def sidecar_agent_stage_name(agent: Agent) -> str:
    """The agent's own build: `<registry>/agent-stage/<agent>/sidecar:<agent version>`."""
    return f"{registry()}/agent-stage/{agent.name}/sidecar:{agent.version}"


def sidecar_agent_image_name(agent: Agent) -> str:
    """`<registry>/agent-<agent>/sidecar:<agent version>` (as `prebuilt_images` names it)."""
    return f"{registry()}/agent-{agent.name}/sidecar:{agent.version}"


def tool_sidecar_image_name(task: Task) -> str:
    """`<registry>/tool-sidecar/<task>:<ssebench-daemon version>` (as `prebuilt_images`)."""
    return f"{registry()}/tool-sidecar/{task.id.lower()}:{runtime_version()}"


@contextmanager
def _context(home: Path) -> Iterator[IO[bytes]]:
    """images/sidecar-agent's files and images/tool's set-up script and seal, as one
    normalized tar stream."""
    with tempfile.TemporaryFile() as stream:
        with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted((home / SIDECAR_AGENT_FOLDER).iterdir()):
                tar.add(path, arcname=path.name, filter=_normalized)
            for name in (SETUP_SCRIPT, SEAL_DOCKERFILE):
                tar.add(home / TOOL_FOLDER / name, arcname=name, filter=_normalized)
        stream.seek(0)
        yield stream


def _context_digest(home: Path) -> str:
    return inputs_digest([inputs_digest([], home / TOOL_FOLDER)], home / SIDECAR_AGENT_FOLDER)


def build_sidecar_agent_base(
    client: docker.DockerClient,
    home: Path,
    *,
    progress: Progress = no_progress,
    platform: str | None = None,
) -> BuiltImage:
    """Build the sidecar agent base on the base image and the runtime (both must exist).

    Raises:
        ImageUnavailableError: an image is missing or the build failed.
        BackendError: the engine cannot be reached.
    """
    base, runtime = base_image(), runtime_image_name()
    parents = [
        local_image_id(client, base, "run `ssebench images bootstrap-base`"),
        local_image_id(client, runtime, "build it first (`ssebench images build-tool`)"),
    ]
    return build_layer(
        client,
        layer="sidecar-agent",
        tag=sidecar_agent_base_name(),
        context=functools.partial(_context, home),
        buildargs={"BASE_IMAGE": base, "RUNTIME_IMAGE": runtime},
        inputs=inputs_digest([*parents, _context_digest(home)]),
        progress=progress,
        platform=platform,
    )


def build_sidecar_agent(
    client: docker.DockerClient,
    agent: Agent,
    home: Path,
    progress: Progress = no_progress,
    platform: str | None = None,
) -> BuiltImage:
    """Build `agent-<agent>/sidecar`: the agent's Dockerfile on the sidecar agent base, sealed.

    Raises:
        ImageUnavailableError: the agent's Dockerfile breaks the rule (nothing is built),
            an image is missing, a build failed, or the agent's build sets what
            `check_agent_stage` refuses.
        BackendError: the engine cannot be reached.
    """
    check_agent_dockerfile(agent)
    base = build_sidecar_agent_base(client, home, progress=progress, platform=platform)
    prepared = prepare_packages(
        agent, lambda text: progress(BuildLine(f"agent {agent.name}", text))
    )
    stage = build_layer(
        client,
        layer=f"agent {agent.name}",
        tag=sidecar_agent_stage_name(agent),
        context=agent_context(agent, prepared),
        buildargs={"TOOL_IMAGE": base.image_id},
        inputs=inputs_digest([base.image_id, *packages_inputs(prepared)], Path(agent.folder)),
        progress=progress,
        platform=platform,
    )
    seal = check_agent_stage(client, agent, stage.image_id, base.image_id)
    return build_layer(
        client,
        layer=f"agent {agent.name} (sealed)",
        tag=sidecar_agent_image_name(agent),
        context=functools.partial(_context, home),
        dockerfile=SEAL_DOCKERFILE,
        buildargs=seal,
        inputs=inputs_digest([base.image_id, stage.image_id, _context_digest(home)]),
        progress=progress,
        platform=platform,
        # Published under the agent's version, it also carries this runtime: the label
        # lets `images push` refuse to replace a published tag silently.
        labels={DAEMON_LABEL: runtime_version()},
    )


def build_tool_sidecar(
    client: docker.DockerClient,
    task: Task,
    home: Path,
    progress: Progress = no_progress,
    platform: str | None = None,
    tool_id: str | None = None,
) -> BuiltImage:
    """Build `tool-sidecar/<task>` on the task's tool layer (which must exist).

    `tool_id` is the tool layer's image ID as its build returned it; None looks up
    `tool_image_name(task)`, which another dataset's task of the same ID (or a
    concurrent build) may have retagged meanwhile.

    Raises:
        ImageUnavailableError: the tool layer is missing or the build failed.
        BackendError: the engine cannot be reached.
    """
    if tool_id is None:
        tool_id = local_image_id(
            client, tool_image_name(task), "build it first (`ssebench images build-tool`)"
        )
    return build_layer(
        client,
        layer="tool-sidecar",
        tag=tool_sidecar_image_name(task),
        context=home / SIDECAR_CASE_FOLDER,
        buildargs={"TOOL_IMAGE": tool_id},
        inputs=inputs_digest([tool_id], home / SIDECAR_CASE_FOLDER),
        progress=progress,
        platform=platform,
        labels={DAEMON_LABEL: runtime_version()},
    )
