"""The agent image of sandbox mode: an agent's Dockerfile built where no hidden material is,
then sealed.

Integrity rule enforced (docs/integrity.md): an agent's Dockerfile never runs where
hidden material is, names no image but its given base, and its image never runs
as root nor holds hidden material: a run's checker (the daemon, the evaluator, the
checks) runs from the task's tool layer in a container of its own, and the agent's
container runs this image as `model` (`SidecarPair`). An agent's Dockerfile runs as
root, and the classic builder lets it name any local image; so it is checked
before anything is built (`_agent_dockerfile.py`: one `FROM ${TOOL_IMAGE}`, no
`--from`, no ONBUILD ...) and built in three steps, each an image:

    tool-base    <registry>/tool-base/<task>:<daemon version>
                 images/tool/open.Dockerfile: the tool layer without /ssebench and
                 /ssebench-repo (the open tool layer), SSEBench's launcher as its
                 entrypoint. The files stay in the tool layer's image layers, which
                 no build step on top and no container of it can read.
    agent stage  <registry>/agent-stage/<agent>/<task>:<agent version>
                 the agent's Dockerfile, its TOOL_IMAGE the open tool layer.
    agent layer  <registry>/agent-<agent>/<task>:<agent version>
                 images/tool/seal.Dockerfile on the agent stage: SSEBench's paths
                 put back from the open tool layer; the agent's CMD kept.

The seal runs none of the agent's code and trusts nothing the agent's build left:

- Its first stage, a copy of the open tool layer, gathers SSEBench's folders
  (/opt/ssebench, the scratch, socket, results and archive folders) and the
  account files (/etc/passwd, group, shadow, gshadow; /etc/nsswitch.conf and
  /etc/ld.so.preload, the tool layer's or empty). The classic builder's
  `COPY --from` keeps numeric owners and modes (checked on Docker 20.10;
  `tests/images/test_agent_layer.py` pins it).
- On the agent stage, as root, it COPYs an empty file to each of those folders'
  paths, then the folders themselves: the builder replaces whatever is at a path
  with a file (a link, a folder holding other files) and that file with the
  folder, and gives every parent folder (/opt, /var, /tmp, /etc ...) the tool
  layer's owner and mode. Nothing is merged into what the agent left.
- Only then does anything run: SSEBench's own Python, from the /opt/ssebench just
  put back, with its own loader and libraries (ld.so.preload neutral, no
  LD_* in the environment: see `check_agent_stage`), removes whatever the agent's
  build put at /ssebench or /ssebench-repo and sweeps the image the way the tool
  layer was swept (`setup.py seal`): no file of uid/gid 1000 outside model's own
  places, nothing world-writable but sticky folders.
- It records the agent stage's CMD, the agent's command, in the image
  (`contract.AGENT_COMMAND_FILE`), which the launcher runs: the backends start the
  agent container with the launcher as its command and no argument, so they need
  nothing of the image's configuration.
- USER is root again and HEALTHCHECK none; the ENTRYPOINT is the open tool layer's
  launcher (an agent's Dockerfile may not set one), and the agent's CMD stays.

An agent's root build may still replace any program of the case image (the
compiler, bash, git) in its own image: only the agent runs them. The checks run
in the checker, from the tool layer, and no root process runs in the agent's
container. Setuid and setgid files it adds give model nothing: the container
starts as model with no capability and no-new-privileges.

Each of the three images carries the digest of its inputs (`_build.py`), so an
unchanged agent layer costs three image inspections and no build.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import docker
from ssebench.backends.docker._agent_dockerfile import check_agent_dockerfile
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
)
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._layers import TOOL_FOLDER, local_image_id, tool_image_name
from ssebench.spec import Agent, ImageUnavailableError, Task, labels, registry, runtime_version

OPEN_DOCKERFILE: Final = "open.Dockerfile"
"""The open tool layer's Dockerfile, in the tool layer's folder."""

SEAL_DOCKERFILE: Final = "seal.Dockerfile"
"""The agent layer's last step, in the tool layer's folder."""

LOADER_VARIABLES: Final = frozenset(
    {"GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH"}
    | {"MALLOC_TRACE", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR"}
)
"""Variables the C library acts on in any process (with every `LD_*`): an agent's image
may not set them, since SSEBench's own processes run as root with the image's environment."""


def tool_base_image_name(task: Task) -> str:
    """The open tool layer's name: `<registry>/tool-base/<task>:<ssebench-daemon version>`."""
    return f"{registry()}/tool-base/{task.id.lower()}:{runtime_version()}"


def agent_stage_image_name(agent: Agent, task: Task) -> str:
    """The agent's own build: `<registry>/agent-stage/<agent>/<task>:<agent version>`."""
    return f"{registry()}/agent-stage/{agent.name}/{task.id.lower()}:{agent.version}"


def agent_image_name(agent: Agent, task: Task) -> str:
    """The agent layer's name: `<registry>/agent-<agent>/<task>:<agent version>`."""
    return f"{registry()}/agent-{agent.name}/{task.id.lower()}:{agent.version}"


def _config(client: docker.DockerClient, image_id: str) -> dict[str, Any]:
    with engine_errors(f"inspecting the image {image_id}"):
        config: dict[str, Any] = client.images.get(image_id).attrs.get("Config") or {}
    return config


def _env(config: dict[str, Any]) -> dict[str, str]:
    pairs = (entry.partition("=") for entry in config.get("Env") or [])
    return {name: value for name, _, value in pairs}


def check_agent_stage(
    client: docker.DockerClient, agent: Agent, stage_id: str, base_id: str
) -> dict[str, str]:
    """Refuse an agent's build whose image settings would act in SSEBench's own processes,
    or that gives no command; the seal's build arguments.

    Compared with its base (`base_id`), the agent stage must keep the ENTRYPOINT, add no
    ONBUILD trigger (it would run in the seal's build), no volume, no `ssebench.*`
    label (SSEBench finds its containers by them), and no variable of
    `LOADER_VARIABLES` or `LD_*` (the seal's sweep runs as root with them). Its CMD is
    the agent's command, which the seal records (`contract.AGENT_COMMAND_FILE`).

    Returns:
        BASE_IMAGE, AGENT_STAGE and AGENT_COMMAND (the CMD as a JSON list) for the seal.

    Raises:
        ImageUnavailableError: one of those, or no CMD; the message names the agent and
            what it set.
        BackendError: the engine cannot be reached.
    """
    stage, tool = _config(client, stage_id), _config(client, base_id)
    found: list[str] = []
    if stage.get("Entrypoint") != tool.get("Entrypoint"):
        found.append("an ENTRYPOINT")
    if stage.get("OnBuild"):
        found.append("ONBUILD triggers")
    volumes = sorted(set(stage.get("Volumes") or {}) - set(tool.get("Volumes") or {}))
    found += [f"the volume {volume}" for volume in volumes]
    stage_labels, tool_labels = stage.get("Labels") or {}, tool.get("Labels") or {}
    found += [
        f"the label {name}"
        for name in sorted(stage_labels)
        if name.startswith(labels.PREFIX) and stage_labels[name] != tool_labels.get(name)
    ]
    stage_env, tool_env = _env(stage), _env(tool)
    found += [
        f"the variable {name}"
        for name in sorted(stage_env)
        if (name.startswith("LD_") or name in LOADER_VARIABLES)
        and stage_env[name] != tool_env.get(name)
    ]
    if found:
        raise ImageUnavailableError(
            f"agent {agent.name}: its Dockerfile sets {', '.join(found)}, which would act in "
            "SSEBench's own processes; set what the agent needs in its command instead"
        )
    command = stage.get("Cmd") or []
    if not command:
        raise ImageUnavailableError(
            f"agent {agent.name}: its Dockerfile has no CMD; give it the agent's command, "
            'e.g. CMD ["/bin/bash", "/opt/agent/run.sh"]'
        )
    return {"BASE_IMAGE": base_id, "AGENT_STAGE": stage_id, "AGENT_COMMAND": json.dumps(command)}


def build_tool_base(
    client: docker.DockerClient,
    task: Task,
    home: Path,
    tool_id: str,
    progress: Progress,
    platform: str | None = None,
) -> BuiltImage:
    """Build the open tool layer: the tool layer `tool_id` without its hidden material."""
    return build_layer(
        client,
        layer="tool-base",
        tag=tool_base_image_name(task),
        context=home / TOOL_FOLDER,
        dockerfile=OPEN_DOCKERFILE,
        buildargs={"TOOL_IMAGE": tool_id},
        inputs=inputs_digest([tool_id], home / TOOL_FOLDER),
        progress=progress,
        platform=platform,
    )


def build_agent(
    client: docker.DockerClient,
    agent: Agent,
    task: Task,
    home: Path,
    progress: Progress,
    platform: str | None = None,
    tool_id: str | None = None,
) -> BuiltImage:
    """Build the agent layer on the task's tool layer (which must exist), as the module says.

    Args:
        client: the engine.
        agent: the agent; its folder is the context of its Dockerfile.
        task: the task.
        home: the SSEBench home (images/tool/).
        progress: receives each line of every build's log.
        platform: the `linux/<arch>` to build for; None for the engine's own.
        tool_id: the tool layer's image ID, as its build returned it; None to look up
            `tool_image_name(task)`, which another dataset's task of the same ID (or a
            concurrent build) may have retagged meanwhile.

    Returns:
        The agent layer, `agent_image_name(agent, task)`, labelled with the daemon
        version it carries (`DAEMON_LABEL`) and its inputs digest; its `image_id` is
        what a run starts.

    Raises:
        ImageUnavailableError: the agent's Dockerfile breaks the rule (nothing is built),
            the tool layer is missing, a build failed, or the agent's build sets what
            `check_agent_stage` refuses.
        BackendError: the engine cannot be reached.
    """
    check_agent_dockerfile(agent)
    if tool_id is None:
        tool = tool_image_name(task)
        tool_id = local_image_id(client, tool, "build it first (`ssebench images build-tool`)")
    base = build_tool_base(client, task, home, tool_id, progress, platform)
    prepared = prepare_packages(
        agent, lambda text: progress(BuildLine(f"agent {agent.name}", text))
    )
    stage = build_layer(
        client,
        layer=f"agent {agent.name}",
        tag=agent_stage_image_name(agent, task),
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
        tag=agent_image_name(agent, task),
        context=home / TOOL_FOLDER,
        dockerfile=SEAL_DOCKERFILE,
        buildargs=seal,
        # The published image carries the runtime: its version says which one.
        labels={DAEMON_LABEL: runtime_version()},
        inputs=inputs_digest([base.image_id, stage.image_id], home / TOOL_FOLDER),
        progress=progress,
        platform=platform,
    )
