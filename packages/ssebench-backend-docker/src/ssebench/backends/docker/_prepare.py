"""The images of one run: every layer built locally, or the published ones.

Built locally: case -> runtime -> tool (the image builders), then in sandbox
mode the agent layer `<registry>/agent-<agent>/<task>:<agent version>`: the agent's Dockerfile
(checked before anything is built) on the tool layer without its hidden
material, sealed with SSEBench's own paths (`_agent_layer.py`); its CMD is the
agent command; the checker runs the tool layer itself. In sidecar mode
`_sidecar_layers.py` builds the checker's image on the tool layer and the agent's
image on a task-independent base.
"""

from __future__ import annotations

import sys

import docker
from docker.models.images import Image
from ssebench.backends.docker._agent_dockerfile import check_agent_dockerfile
from ssebench.backends.docker._agent_layer import build_agent
from ssebench.backends.docker._build import BuildLine
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._layers import build_runtime, build_tool, build_tool_images
from ssebench.backends.docker._platforms import check_buildable, matches
from ssebench.backends.docker._sidecar_layers import build_sidecar_agent, build_tool_sidecar
from ssebench.backends.docker._tool_layers import build_extension_tool_layer
from ssebench.spec import (
    ImageRequest,
    Images,
    ImageUnavailableError,
    PlatformNotFoundError,
    UserError,
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


def pull_exact(client: docker.DockerClient, name: str, platform: str | None) -> Image:
    """Pull `name` (`repo:tag` or `repo@sha256:…`) for `platform`, with no fallback.

    Raises:
        ImageUnavailableError: the pull failed, or the registry holds no `platform`
            variant; the message is the reason, one line.
        BackendError: the engine cannot be reached.
    """
    # Progress only once the registry answered: a failure stays one line (or one warning).
    try:
        with engine_errors(f"pulling {name}", family=ImageUnavailableError):
            repository, tag = split_tag(name)
            chunks = client.api.pull(repository, tag, platform=platform, stream=True, decode=True)
            status = "pulled"
            for chunk in chunks:
                if "error" in chunk:
                    raise ImageUnavailableError(str(chunk["error"]))
                status = str(chunk.get("status") or status)
                if chunk.get("id") and status == "Pull complete":
                    print(f"{name}: layer {chunk['id']} pulled", file=sys.stderr, flush=True)
    except ImageUnavailableError as exc:
        raise ImageUnavailableError(
            one_line(str(exc).removeprefix(f"pulling {name} failed: "))
        ) from exc
    # The engine pulls a single-platform image whatever platform was asked for.
    pulled = local_image(client, name)
    if pulled is not None and matches(pulled.attrs, platform):
        print(f"{name}: {status}", file=sys.stderr, flush=True)
        return pulled
    found = "nothing" if pulled is None else _platform_of(pulled)
    raise _NoVariantError(
        f"image {name} has no {platform} variant: the registry holds it for {found} only"
    )


class _NoVariantError(ImageUnavailableError):
    """The pull worked, but not for the run's platform: no copy on this machine helps."""


def pull_image(client: docker.DockerClient, name: str, platform: str | None) -> None:
    """Pull `name` for `platform`; if that fails, fall back to the copy on this machine.

    An unchanged image costs one registry round trip: the engine compares the
    manifest and downloads nothing.

    Raises:
        ImageUnavailableError: the pull failed and the machine has no copy of it for
            `platform`; one line naming the image.
        BackendError: the engine cannot be reached.
    """
    try:
        pull_exact(client, name, platform)
        return
    except _NoVariantError:
        raise
    except ImageUnavailableError as exc:
        reason = str(exc)
    local = local_image(client, name)
    if local is None:
        raise ImageUnavailableError(
            f"image {name} cannot be pulled ({reason}) and is not on this machine; "
            "publish it with `ssebench images push`"
        )
    if not matches(local.attrs, platform):
        raise ImageUnavailableError(
            f"image {name} cannot be pulled ({reason}), and the copy on this machine is "
            f"for {_platform_of(local)}, not {platform}"
        )
    print(
        f"warning: cannot pull {name} ({reason}); using the copy on this machine",
        file=sys.stderr,
    )


def _platform_of(image: Image) -> str:
    return f"{image.attrs.get('Os')}/{image.attrs.get('Architecture')}"


def split_tag(name: str) -> tuple[str, str]:
    """`host:port/repo:tag` as (`host:port/repo`, `tag`); a name without a tag gets `latest`;
    `repo@sha256:…` as (`repo`, `sha256:…`), which the engine pulls by digest."""
    if "@" in name:
        repository, _, digest = name.partition("@")
        return repository, digest
    repository, colon, tag = name.rpartition(":")
    if not colon or "/" in tag:
        return name, "latest"
    return repository, tag


def one_line(text: str) -> str:
    """The first line of an error, for a message that must stay one line."""
    return text.strip().splitlines()[0] if text.strip() else "no reason given"


def local_image(client: docker.DockerClient, name: str) -> Image | None:
    """The engine's image of that name, or None (nothing is pulled).

    Raises:
        BackendError: the engine cannot be asked.
    """
    try:
        with engine_errors(f"asking the Docker engine about image {name}"):
            return client.images.get(name)
    except (PlatformNotFoundError, ImageUnavailableError):
        return None


def _published(client: docker.DockerClient, request: ImageRequest) -> Images:
    images = prebuilt_images(request)
    for name in (images.agent, images.environment):
        if name is not None:
            pull_image(client, name, request.platform)
    return images


def by_id(client: docker.DockerClient, images: Images) -> Images:
    """The same images named by their IDs, which a run starts by (docs/architecture.md): a tag
    pulled or built again meanwhile never changes what the run runs.

    Raises:
        ImageUnavailableError: an image is gone.
        BackendError: the engine cannot be reached.
    """

    def image_id(name: str) -> str:
        with engine_errors(f"inspecting the image {name}", family=ImageUnavailableError):
            return str(client.images.get(name).id)

    environment = images.environment
    return Images(
        agent=image_id(images.agent),
        environment=image_id(environment) if environment is not None else None,
    )


def prepare_run_images(client: docker.DockerClient, request: ImageRequest) -> Images:
    """The images of a run, built (or, with `prebuilt`, pulled) as needed.

    Sidecar mode builds the same layers up to the task's tool layer, then the
    task container's image on it and the task-independent agent image
    (`_sidecar_layers.py`). A sandbox run with a tool layer from an extension
    builds it after the built-in one (`_tool_layers.py`) and the agent on it.

    Raises:
        UserError: a tool layer other than the built-in one in sidecar mode or
            with `prebuilt`.
        ImageUnavailableError: the agent's Dockerfile breaks the rule of
            `_agent_dockerfile.py` (checked before anything is built); the request's
            platform is one this machine cannot build for; a build failed (naming the
            layer and the step); or a published image can neither be pulled nor found
            on this machine.
        BackendError: the engine cannot be reached.
    """
    layer = request.tool_layer
    if layer is not None and not layer.builtin and (request.prebuilt or request.mode != "sandbox"):
        # The runner refuses this first; a backend called directly says the same.
        raise UserError(f"tool layer {layer.name!r}: tool layers are for sandbox runs that build")
    if request.prebuilt:
        return by_id(client, _published(client, request))
    check_agent_dockerfile(request.agent)
    check_buildable(client, request.platform)
    home = find_home()
    printer = StepPrinter()
    platform = request.platform
    try:
        # Every layer on top is named by the ID its build returned, and the run starts by
        # ID (docs/architecture.md): another dataset's task with the same ID, built at the same
        # time, retags the same names but never changes what this run runs.
        if request.case is not None:
            # A catalog's task: its case image pulled, or built from a folder that matches.
            from ssebench.backends.docker._catalog import provide_case

            provide_case(client, request, printer)
            build_runtime(client, home, progress=printer, platform=platform)
            tool = build_tool(client, request.task, home, progress=printer, platform=platform)
        else:
            tool = build_tool_images(
                client, [request.task], home, progress=printer, platform=platform
            )[-1]
        if request.mode == "sidecar":
            environment = build_tool_sidecar(
                client, request.task, home, printer, platform, tool_id=tool.image_id
            )
            agent = build_sidecar_agent(client, request.agent, home, printer, platform)
            return Images(agent=agent.image_id, environment=environment.image_id)
        if layer is not None and not layer.builtin:
            tool = build_extension_tool_layer(
                client, request.task, layer, tool, progress=printer, platform=platform
            )
        built = build_agent(
            client, request.agent, request.task, home, printer, platform, tool_id=tool.image_id
        )
        return Images(agent=built.image_id, environment=tool.image_id)
    finally:
        printer.flush()
