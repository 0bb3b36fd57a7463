"""Building one image layer with the engine's classic builder, its log streamed as progress.

Every SSEBench image (case, runtime, tool, and later agent layers) is built
through `build_layer`, so they all report progress, reuse the engine's cache and
fail the same way: an `ImageUnavailableError` naming the layer and the step.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Final

from typing_extensions import override

import docker
from ssebench.backends.docker._cache import cache_lock
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._from_images import require_from_images
from ssebench.spec import (
    ImageUnavailableError,
    PlatformNotFoundError,
    PlatformRefusedError,
    registry,
)

_STEP: Final = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_BUILT: Final = re.compile(r"^Successfully built ([0-9a-f]+)$")
_CACHED: Final = " ---> Using cache"
_LAYER: Final = re.compile(r"^ ---> (?:Running in )?[0-9a-f]{12,}$")
_ESCAPE: Final = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
"""Terminal escapes the engine puts around a step's stderr."""
_TAIL: Final = 20
"""Lines of the failing step's output an error message carries."""

INPUTS_LABEL: Final = "org.ssebench.inputs"
"""Label of every layer built with `inputs`: a digest of everything it was built from.

When the image under a layer's name carries the digest of the current inputs,
`build_layer` uses it without sending the engine a build at all: a run with
every layer current costs a few image inspections instead of four builds.
"""

DAEMON_LABEL: Final = "org.ssebench.daemon-version"
"""Label of every image that carries the SSEBench runtime: the ssebench-daemon version in it.

A published tag is named by the agent's version only, so this label (with
`INPUTS_LABEL`) is what tells two images of one tag apart (`ssebench images push`)."""

REGISTRY_LABEL: Final = "org.ssebench.registry"
"""Label of every layer: the `SSEBENCH_REGISTRY` prefix it was built under.

An old layer loses its name when a rebuild takes it; this label still says
whose it is, so `ssebench images prune` removes only the active prefix's."""


@dataclass(frozen=True)
class BuildLine:
    """One line of a build's log, as progress.

    `step` is set on the line that starts a step ("Step 3/8 : RUN ...") and on the
    line saying it came from the cache; other lines are the step's output.
    """

    layer: str
    text: str
    step: Step | None = None
    reused: bool = False
    """Set on the one line saying the layer was up to date and no build was sent."""


Progress = Callable[[BuildLine], None]
"""Receives each line of a build's log."""

Context = Path | IO[bytes] | Callable[[], AbstractContextManager[IO[bytes]]]
"""A build context: a folder (its .dockerignore applies), an uncompressed tar stream,
or a function that makes the stream only when a build is actually sent."""


def no_progress(_line: BuildLine) -> None:
    """A progress callback that shows nothing."""


@dataclass(frozen=True)
class Step:
    """One Dockerfile instruction of a build, and whether the engine's cache served it."""

    number: int
    total: int
    instruction: str
    cached: bool = False
    produced: bool = False
    """Whether the step made an image (an ARG before the first FROM makes none)."""

    @property
    def is_from(self) -> bool:
        """A FROM instruction, which starts a stage and never runs."""
        return self.instruction.upper().startswith("FROM ")

    @override
    def __str__(self) -> str:
        return f"step {self.number}/{self.total} ({_cut(self.instruction)})"


@dataclass(frozen=True)
class BuiltImage:
    """A layer the engine built (or found entirely in its cache)."""

    layer: str
    tag: str
    image_id: str
    steps: tuple[Step, ...] = field(default=())

    @property
    def rebuilt(self) -> tuple[Step, ...]:
        """The steps that ran rather than coming from the cache (FROM excluded)."""
        return tuple(
            step for step in self.steps if step.produced and not step.cached and not step.is_from
        )

    @property
    def cached(self) -> bool:
        """Whether every step came from the engine's cache."""
        return not self.rebuilt


def inputs_digest(parts: Iterable[str], folder: Path | None = None) -> str:
    """A digest of `parts` (image IDs, versions, keys) and of every entry under `folder`.

    Each entry counts with its relative path, its kind and permission bits, and its
    content (a symlink: its target). `__pycache__` folders are left out. A file the
    build's .dockerignore excludes still counts: a change to it costs one build
    that the engine's cache serves, never a stale image.
    """
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    if folder is None:
        return digest.hexdigest()
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted([*dirs, *files]):
            path = Path(top, name)
            info = path.lstat()
            kind = stat.S_IFMT(info.st_mode)
            digest.update(
                f"{path.relative_to(folder)}\0{kind:o} {info.st_mode & 0o7777:o}\0".encode()
            )
            if stat.S_ISLNK(info.st_mode):
                digest.update(str(path.readlink()).encode() + b"\0")
            elif stat.S_ISREG(info.st_mode):
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _cut(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Log:
    """Follows the builder's stream: the current step, its output, the image ID."""

    def __init__(self, layer: str, tag: str, progress: Progress) -> None:
        self.layer = layer
        self.tag = tag
        self.progress = progress
        self.steps: list[Step] = []
        self.output: list[str] = []
        self.image_id: str | None = None
        self._partial = ""

    def feed(self, text: str) -> None:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self.line(line.rstrip("\r"))

    def flush(self) -> None:
        if self._partial:
            self.line(self._partial)
            self._partial = ""

    def line(self, line: str) -> None:
        line = _ESCAPE.sub("", line)
        if not line.strip():
            return
        started = _STEP.match(line)
        if started:
            step = Step(int(started.group(1)), int(started.group(2)), started.group(3))
            self.steps.append(step)
            self.output = []
            self.progress(BuildLine(self.layer, line, step))
            return
        if line.startswith(_CACHED) and self.steps:
            self.steps[-1] = replace(self.steps[-1], cached=True)
            self.progress(BuildLine(self.layer, line, self.steps[-1]))
            return
        if _LAYER.match(line) and self.steps:
            self.steps[-1] = replace(self.steps[-1], produced=True)
        built = _BUILT.match(line)
        if built:
            self.image_id = self.image_id or built.group(1)
        self.output = [*self.output[-(_TAIL - 1) :], line]
        self.progress(BuildLine(self.layer, line))

    def failure(self, error: str) -> ImageUnavailableError:
        self.flush()
        where = f"at {self.steps[-1]}" if self.steps else "before its first step"
        tail = "\n".join(line for line in self.output if line.strip())
        message = f"{self.layer} layer ({self.tag}) failed {where}: {error.strip()}"
        return ImageUnavailableError(message + (f"\n{tail}" if tail else ""))


def build_layer(
    client: docker.DockerClient,
    *,
    layer: str,
    tag: str,
    context: Context,
    buildargs: Mapping[str, str] | None = None,
    dockerfile: str = "Dockerfile",
    nocache: bool = False,
    labels: Mapping[str, str] | None = None,
    inputs: str | None = None,
    progress: Progress = no_progress,
    platform: str | None = None,
) -> BuiltImage:
    """Build one image layer with the classic builder, streaming its log to `progress`.

    Nothing is pulled: every image a FROM names must exist locally (checked before a
    build is sent when `context` is a folder, `_from_images.py`). With
    `inputs` (see `inputs_digest`), an image under `tag` built from the same
    inputs and options is used as it is, and no build is sent.

    Args:
        client: the engine.
        layer: the layer's name for messages ("case", "runtime", "tool", ...).
        tag: the full image name to tag the result with.
        context: the build context (see `Context`).
        buildargs: the build's ARG values.
        dockerfile: the Dockerfile's path inside the context.
        nocache: run every step again instead of reusing the engine's cache.
        labels: labels to set on the image.
        inputs: a digest of what the layer is built from: the IDs of the images its
            FROMs name and the context's files (build arguments and labels are added
            here); None to leave the decision to the engine's cache.
        progress: receives each line of the log.
        platform: the `linux/<arch>` to build for; None for the engine's own.

    Returns:
        The image, with which steps ran and which came from the cache.

    Raises:
        ImageUnavailableError: the build failed; the message names the layer, the
            failing step and the end of its output. Or an image a FROM names is
            missing locally (nothing is sent).
        BackendError: the engine cannot be reached.
    """
    # A cached layer is made by one process at a time: a second finds the first's current.
    with cache_lock("image", tag) if inputs is not None else nullcontext():
        log = _Log(layer, tag, progress)
        labels = {REGISTRY_LABEL: registry(), **(labels or {})}
        if inputs is not None:
            settings = [*sorted((buildargs or {}).items()), *sorted(labels.items())]
            if platform is not None:
                # Only when set: an image built for the engine's own platform keeps its digest.
                settings.append(("platform", platform))
            labels[INPUTS_LABEL] = inputs_digest(
                [inputs, dockerfile, *(f"{name}={value}" for name, value in settings)]
            )
            current = None if nocache else _current(client, tag, labels[INPUTS_LABEL])
            if current is not None:
                progress(
                    BuildLine(
                        layer, f"{tag} is up to date: its inputs have not changed", reused=True
                    )
                )
                return BuiltImage(layer=layer, tag=tag, image_id=current)
        if isinstance(context, Path):
            # The builder would pull a missing FROM image; nothing is ever pulled.
            require_from_images(
                client, layer=layer, dockerfile=context / dockerfile, buildargs=buildargs or {}
            )
        options: dict[str, Any] = {
            "tag": tag,
            "dockerfile": dockerfile,
            "buildargs": dict(buildargs or {}),
            "nocache": nocache,
            "labels": labels,
            "rm": True,
            "forcerm": True,
            "pull": False,
            "decode": True,
        }
        if platform is not None:
            options["platform"] = platform
        with ExitStack() as stack, engine_errors(f"building the {layer} layer ({tag})"):
            if isinstance(context, Path):
                options["path"] = str(context)
            else:
                options["custom_context"] = True
                options["fileobj"] = (
                    stack.enter_context(context()) if callable(context) else context
                )
            for chunk in _chunks(client, options, log):
                if "error" in chunk:
                    raise log.failure(str(chunk["error"]))
                if "stream" in chunk:
                    log.feed(str(chunk["stream"]))
                aux = chunk.get("aux")
                if isinstance(aux, dict) and isinstance(aux.get("ID"), str):
                    log.image_id = aux["ID"]
            log.flush()
        if log.image_id is None:
            raise log.failure("the engine reported no image")
        return BuiltImage(layer=layer, tag=tag, image_id=log.image_id, steps=tuple(log.steps))


def _current(client: docker.DockerClient, tag: str, inputs: str) -> str | None:
    """The ID of the image under `tag` if it was built from exactly these inputs."""
    try:
        with engine_errors(f"inspecting the image {tag}"):
            image = client.images.get(tag)
    except (ImageUnavailableError, PlatformNotFoundError):
        return None
    return str(image.id) if (image.labels or {}).get(INPUTS_LABEL) == inputs else None


def _chunks(
    client: docker.DockerClient, options: dict[str, Any], log: _Log
) -> Iterator[dict[str, Any]]:
    try:
        with engine_errors("sending the build"):
            stream = client.api.build(**options)
    except PlatformRefusedError as exc:
        # The engine refused the request itself (a bad Dockerfile path, a bad tag).
        raise log.failure(str(exc)) from exc
    yield from stream
