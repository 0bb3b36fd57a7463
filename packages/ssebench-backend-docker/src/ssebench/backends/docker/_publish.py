"""Publishing run images to a registry (`ssebench images push`).

A published image is named by `prebuilt_images` (the seed's names), so the
Docker backend's `--prebuilt` and any other backend pull exactly what was
pushed. Its tag is the agent's version only, yet the image also carries the
SSEBench runtime: a changed daemon under an unchanged agent version must not
replace a published tag silently. So every pushed image carries the daemon
version (`DAEMON_LABEL`) and its inputs digest (`INPUTS_LABEL`), and a tag the
registry already holds with another image is replaced only with `force`.

"The same image" means the registry's manifest digest for the tag is one the
local image was pushed or pulled as (its RepoDigests): the engine records
that digest on every push and pull. Registry credentials are the engine's own
(`docker login`, read by the docker SDK from the user's config): nothing here
takes, prints or logs one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Literal

import docker
from docker.models.images import Image
from ssebench.backends.docker._agent_dockerfile import check_agent_dockerfile
from ssebench.backends.docker._agent_layer import build_agent
from ssebench.backends.docker._build import DAEMON_LABEL, INPUTS_LABEL, Progress
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._layers import build_tool_images
from ssebench.backends.docker._prepare import one_line, split_tag
from ssebench.backends.docker._sidecar_layers import build_sidecar_agent, build_tool_sidecar
from ssebench.spec import (
    DEFAULT_REGISTRY,
    REGISTRY_ENV,
    Agent,
    ImageRequest,
    ImageUnavailableError,
    Message,
    Task,
    UserError,
    prebuilt_images,
    registry,
)
from ssebench.spec.catalog import registry_host

PushState = Literal["pushed", "replaced", "up to date"]

Say = Callable[[str], None]
"""Receives one line of progress."""

_LAYER_DONE: Final = frozenset({"Pushed", "Layer already exists", "Mounted from"})


class Published(Message, frozen=True, kw_only=True):
    """One image `images push` published (or found already published), as `--json` prints it."""

    image: str
    id: str
    digest: str
    state: PushState
    daemon_version: str
    inputs: str


def push_registry() -> str:
    """The `SSEBENCH_REGISTRY` in force, if it names a registry host (`host[:port]/prefix`).

    Raises:
        UserError: it is a local prefix (such as the default `ssebench`), which would
            make the engine push to Docker Hub.
    """
    prefix = registry()
    if registry_host() is None:
        default = " (the default)" if prefix == DEFAULT_REGISTRY else ""
        raise UserError(
            f"{REGISTRY_ENV} is {prefix!r}{default}, a local prefix: to push, set it to a "
            "registry host and prefix, host[:port]/prefix, such as 127.0.0.1:5000/ssebench"
        )
    return prefix


def _registry_digest(client: docker.DockerClient, name: str) -> str | None:
    """The manifest digest the registry holds under `name`, or None if it holds none."""
    try:
        with engine_errors(f"asking the registry about {name}", family=ImageUnavailableError):
            return str(client.images.get_registry_data(name).id)
    except ImageUnavailableError as exc:
        # The engine reports an unknown tag as a refusal naming the manifest.
        text = str(exc).lower()
        if "manifest unknown" in text or "not found" in text:
            return None
        raise ImageUnavailableError(one_line(str(exc))) from exc


def _local_digests(image: Image, repository: str) -> set[str]:
    digests = set()
    for entry in image.attrs.get("RepoDigests") or []:
        name, _, digest = str(entry).partition("@")
        if name == repository:
            digests.add(digest)
    return digests


def push_image(
    client: docker.DockerClient,
    name: str,
    *,
    force: bool,
    say: Say,
    required: tuple[str, ...] = (DAEMON_LABEL, INPUTS_LABEL),
) -> Published:
    """Push the local image `name` unless the registry already holds it.

    Args:
        client: the engine (its own login is used for the registry).
        name: the full image name, `host[:port]/prefix/...:tag`.
        force: replace a tag the registry holds with another image.
        say: receives progress lines (one per layer pushed).
        required: the labels the image must carry (a case image has no daemon).

    Raises:
        UserError: the image lacks a required label, or the registry
            holds another image under the tag and `force` is not set.
        ImageUnavailableError: the image is missing, or the registry refused the push.
        BackendError: the engine cannot be reached.
    """
    with engine_errors(f"inspecting the image {name}", family=ImageUnavailableError):
        image = client.images.get(name)
    found = image.labels or {}
    daemon, inputs = found.get(DAEMON_LABEL, ""), found.get(INPUTS_LABEL, "")
    if not all(found.get(label) for label in required):
        raise UserError(
            f"image {name} has no {' or '.join(required)} label, so a later push could "
            "not tell it apart from another build: build it with ssebench"
        )
    repository, tag = split_tag(name)
    remote = _registry_digest(client, name)
    if remote is not None and remote in _local_digests(image, repository):
        say(f"{name}: up to date in the registry ({remote})")
        return Published(
            image=name,
            id=str(image.id),
            digest=remote,
            state="up to date",
            daemon_version=daemon,
            inputs=inputs,
        )
    if remote is not None and not force:
        carries = (
            f"this one carries daemon {daemon}: bump the agent's version"
            if daemon
            else ("this one was built from other files: bump the dataset's version")
        )
        raise UserError(
            f"the registry holds another image under {name} ({remote}); {carries}, "
            "or push with --force to replace it"
        )
    say(f"{name}: pushing (daemon {daemon})" if daemon else f"{name}: pushing")
    digest = _push(client, repository, tag, name, say)
    return Published(
        image=name,
        id=str(image.id),
        digest=digest,
        state="pushed" if remote is None else "replaced",
        daemon_version=daemon,
        inputs=inputs,
    )


def _push(client: docker.DockerClient, repository: str, tag: str, name: str, say: Say) -> str:
    digest = ""
    with engine_errors(f"pushing {name}", family=ImageUnavailableError):
        for chunk in client.api.push(repository, tag, stream=True, decode=True):
            if "error" in chunk:
                raise ImageUnavailableError(f"pushing {name} failed: {one_line(chunk['error'])}")
            status = str(chunk.get("status") or "")
            if chunk.get("id") and any(status.startswith(done) for done in _LAYER_DONE):
                say(f"{name}: layer {chunk['id']} {status.lower()}")
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                digest = str(aux["Digest"])
    if not digest:
        raise ImageUnavailableError(f"pushing {name} failed: the engine reported no digest")
    say(f"{name}: pushed ({digest})")
    return digest


PUSH_MODES: Final = ("sandbox", "sidecar", "both")
"""What `images push --mode` accepts."""


def push_modes(mode: str) -> tuple[Literal["sandbox", "sidecar"], ...]:
    """The run modes whose images `--mode` asks for.

    Raises:
        UserError: the mode is not one of `PUSH_MODES`.
    """
    if mode == "sandbox":
        return ("sandbox",)
    if mode == "sidecar":
        return ("sidecar",)
    if mode == "both":
        return ("sandbox", "sidecar")
    raise UserError(f"invalid mode {mode!r}: use {', '.join(PUSH_MODES[:-1])} or {PUSH_MODES[-1]}")


def publish(
    client: docker.DockerClient,
    tasks: Sequence[Task],
    agents: Sequence[Agent],
    home: Path,
    *,
    modes: Sequence[Literal["sandbox", "sidecar"]],
    force: bool,
    progress: Progress,
    say: Say,
) -> list[Published]:
    """Build what is missing of each image the modes' runs use, and push it.

    Sandbox: one agent image per agent and task, and the task's tool layer (the
    checker's image) once per task. Sidecar: one agent image per agent (for every
    task) and one checker's image per task. Every agent's
    Dockerfile is checked and the registry named before anything is built.

    Raises:
        UserError: as `push_registry` and `push_image`; an agent's Dockerfile breaks the rule.
        ImageUnavailableError: a build, an inspection or a push failed.
        BackendError: the engine cannot be reached.
    """
    push_registry()
    for agent in agents:
        check_agent_dockerfile(agent)
    tools = build_tool_images(client, tasks, home, progress=progress)[2::2]
    published = []
    for mode in modes:
        for task, tool in zip(tasks, tools, strict=True):
            for agent in agents:
                names = prebuilt_images(ImageRequest(mode=mode, task=task, agent=agent))
                if mode == "sandbox":
                    built = [build_agent(client, agent, task, home, progress, None, tool.image_id)]
                    if agent == agents[0]:  # the checker's image: once per task
                        built.append(tool)
                elif agent == agents[0]:
                    built = [
                        build_sidecar_agent(client, agent, home, progress),
                        build_tool_sidecar(client, task, home, progress),
                    ]
                elif task == tasks[0]:  # the agent image serves every task: once per agent
                    built = [build_sidecar_agent(client, agent, home, progress)]
                else:
                    continue
                for image in built:
                    # The builders and prebuilt_images name from one registry().
                    if image.tag not in (names.agent, names.environment):
                        raise ImageUnavailableError(
                            f"built {image.tag}, but the published names are "
                            f"{names.agent} and {names.environment}"
                        )
                    published.append(push_image(client, image.tag, force=force, say=say))
    return published
