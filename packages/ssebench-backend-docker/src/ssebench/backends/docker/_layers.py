"""SSEBench's image layers, built in order: case -> runtime -> tool (docs/architecture.md).

    case     <registry>/case/<dataset>/<task>:<dataset version>   the task's Dockerfile
    runtime  <registry>/runtime:<ssebench-daemon version>          images/runtime/
    tool     <registry>/tool/<task>:<ssebench-daemon version>      images/tool/ on case + runtime

Each is one `build_layer` call; a later layer (the agent layer) is one more
small function of the same shape. Nothing is pulled: the base image, and for
the tool layer the case and runtime images, must exist locally. Every layer
is labelled with a digest of its inputs (the IDs of the images it is built
on, its context's files), so an unchanged layer costs no build at all.
"""

from __future__ import annotations

import functools
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Final

import docker
from ssebench.backends.docker._build import (
    DAEMON_LABEL,
    BuildLine,
    BuiltImage,
    Progress,
    build_layer,
    inputs_digest,
    no_progress,
)
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._from_images import MissingFromImageError
from ssebench.backends.docker._wheelhouse import RuntimePackages, prepare_runtime_packages
from ssebench.spec import (
    ImageUnavailableError,
    PlatformNotFoundError,
    Task,
    UserError,
    base_image,
    check_task_files,
    dockerfile_problems,
    registry,
    runtime_version,
)
from ssebench.spec.catalog import TASK_FILES_LABEL, case_image_path, files_digest, task_files

RUNTIME_FOLDER: Final = Path("images") / "runtime"
"""The runtime's Dockerfile and assembly script, relative to the home."""

TOOL_FOLDER: Final = Path("images") / "tool"
"""The tool layer's Dockerfile and set-up script, relative to the home."""

PACKAGES_IN_CONTEXT: Final = "packages"
"""Where the runtime's build context holds the prepared package trees."""

_CONTEXT_MTIME: Final = 315532800
"""1980-01-01: every file of a generated build context gets this time."""


def case_image_name(task: Task) -> str:
    """The case image's name: `<registry>/case/<dataset>/<task>:<dataset version>`."""
    return f"{registry()}/{case_image_path(task)}"


def runtime_image_name() -> str:
    """The runtime image's name: `<registry>/runtime:<ssebench-daemon version>`.

    Raises:
        ImageUnavailableError: ssebench-daemon is not installed.
    """
    return f"{registry()}/runtime:{runtime_version()}"


def tool_image_name(task: Task) -> str:
    """The tool layer's name: `<registry>/tool/<task>:<ssebench-daemon version>`.

    Raises:
        ImageUnavailableError: ssebench-daemon is not installed.
    """
    return f"{registry()}/tool/{task.id.lower()}:{runtime_version()}"


def local_image_id(client: docker.DockerClient, name: str, hint: str) -> str:
    """The ID of a local image that a layer is built on.

    Raises:
        ImageUnavailableError: it is missing (nothing is pulled); `hint` says what to do.
        BackendError: the engine cannot be reached.
    """
    try:
        with engine_errors(f"inspecting the image {name}"):
            return str(client.images.get(name).id)
    except (ImageUnavailableError, PlatformNotFoundError):
        pass
    raise ImageUnavailableError(f"image {name} is missing locally (nothing is pulled): {hint}")


def _require_base(client: docker.DockerClient) -> tuple[str, str]:
    name = base_image()
    return name, local_image_id(client, name, "run `ssebench images bootstrap-base`")


def _check_files(task: Task) -> None:
    try:
        check_task_files(task)
    except UserError as exc:
        raise ImageUnavailableError(f"case layer: {exc}") from exc


def build_case(
    client: docker.DockerClient,
    task: Task,
    *,
    force: bool = False,
    progress: Progress = no_progress,
    platform: str | None = None,
) -> BuiltImage:
    """Build a task's case image from its folder's Dockerfile.

    Args:
        client: the engine.
        task: the task.
        force: run every step again instead of reusing the engine's cache.
        progress: receives each line of the build's log.

    Returns:
        The case image.

    Raises:
        ImageUnavailableError: a file the task's config names is missing from its
            folder (nothing is built), the base image or an image its Dockerfile names
            is missing, or the build failed (with the Dockerfile's lines that cannot
            build offline and how to adapt them, if it has any).
        BackendError: the engine cannot be reached.
    """
    _check_files(task)
    base, base_id = _require_base(client)
    try:
        return build_layer(
            client,
            layer="case",
            tag=case_image_name(task),
            context=Path(task.folder),
            buildargs={"SSEBENCH_BASE_IMAGE": base, "SSEBENCH_REGISTRY": registry()},
            # Which version of the task it is, so a catalog's pull can tell (`_catalog.py`).
            labels={TASK_FILES_LABEL: files_digest(task_files(Path(task.folder)))},
            nocache=force,
            inputs=inputs_digest([base_id], Path(task.folder)),
            progress=progress,
            platform=platform,
        )
    except MissingFromImageError:
        raise  # one line that says it all
    except ImageUnavailableError as exc:
        # An earlier task's Dockerfile fails here for want of a network: say which
        # lines need adapting and how, with the build's own message.
        try:
            hints = dockerfile_problems((Path(task.folder) / "Dockerfile").read_text())
        except (OSError, UnicodeDecodeError):
            hints = []
        if not hints:
            raise
        raise ImageUnavailableError(f"{exc}\n" + "\n".join(hints)) from exc


def _normalized(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if "__pycache__" in Path(info.name).parts:
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = _CONTEXT_MTIME
    info.mode = 0o755 if info.isdir() or info.mode & 0o100 else 0o644
    return info


@contextmanager
def runtime_context(folder: Path, packages: RuntimePackages) -> Iterator[IO[bytes]]:
    """The runtime's build context as a tar stream: `folder`'s files plus the package trees.

    Owners, times and modes are normalized, so the same inputs give the same
    context and the engine's cache recognizes it.
    """
    with tempfile.TemporaryFile() as stream:
        with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(folder.iterdir()):
                tar.add(path, arcname=path.name, filter=_normalized)
            for name, tree in (
                ("dependencies", packages.dependencies),
                ("workspace", packages.workspace),
            ):
                tar.add(tree.folder, arcname=f"{PACKAGES_IN_CONTEXT}/{name}", filter=_normalized)
        stream.seek(0)
        yield stream


def build_runtime(
    client: docker.DockerClient,
    home: Path,
    *,
    force: bool = False,
    progress: Progress = no_progress,
    platform: str | None = None,
) -> BuiltImage:
    """Build the runtime image: /opt/ssebench with its own Python, our packages, git and bash.

    Args:
        client: the engine.
        home: the SSEBench home (images/runtime/ and the workspace's uv.lock).
        force: prepare the packages and run every step again.
        progress: receives each line of the preparation and of the build's log.

    Returns:
        The runtime image.

    Raises:
        ImageUnavailableError: the base image is missing, preparing the packages
            failed or the build failed.
        BackendError: the engine cannot be reached.
    """
    base, base_id = _require_base(client)
    packages = prepare_runtime_packages(
        home, force=force, say=lambda line: progress(BuildLine("runtime", line))
    )
    # The package trees are represented by their keys: the context holds them
    # whole, and hashing them again on every run would cost more than the check saves.
    keys = [base_id, packages.dependencies.key, packages.workspace.key]
    return build_layer(
        client,
        layer="runtime",
        tag=runtime_image_name(),
        context=functools.partial(runtime_context, home / RUNTIME_FOLDER, packages),
        buildargs={"SSEBENCH_BASE_IMAGE": base},
        nocache=force,
        inputs=inputs_digest(keys, home / RUNTIME_FOLDER),
        progress=progress,
        platform=platform,
    )


def build_tool(
    client: docker.DockerClient,
    task: Task,
    home: Path,
    *,
    force: bool = False,
    progress: Progress = no_progress,
    platform: str | None = None,
) -> BuiltImage:
    """Build a task's tool layer on its case image and the runtime image (both must exist).

    Args:
        client: the engine.
        task: the task.
        home: the SSEBench home (images/tool/).
        force: run every step again instead of reusing the engine's cache.
        progress: receives each line of the build's log.

    Returns:
        The tool layer.

    Raises:
        ImageUnavailableError: the case or runtime image is missing or the build failed.
        BackendError: the engine cannot be reached.
    """
    case, runtime = case_image_name(task), runtime_image_name()
    parents = [
        local_image_id(client, case, "build it first (`ssebench build-case`)"),
        local_image_id(client, runtime, "build it first (`ssebench images build-tool`)"),
    ]
    return build_layer(
        client,
        layer="tool",
        tag=tool_image_name(task),
        context=home / TOOL_FOLDER,
        buildargs={"CASE_IMAGE": case, "RUNTIME_IMAGE": runtime},
        nocache=force,
        inputs=inputs_digest(parents, home / TOOL_FOLDER),
        progress=progress,
        platform=platform,
        # A sandbox run's checker: `images push` publishes it, and refuses a tag without.
        labels={DAEMON_LABEL: runtime_version()},
    )


def build_tool_images(
    client: docker.DockerClient,
    tasks: Sequence[Task],
    home: Path,
    *,
    force: bool = False,
    progress: Progress = no_progress,
    platform: str | None = None,
) -> list[BuiltImage]:
    """Build every layer up to the tool layer: the runtime once, then each task's case and tool.

    Args:
        client: the engine.
        tasks: the tasks.
        home: the SSEBench home.
        force: rebuild every layer without the engine's cache.
        progress: receives each line of every build's log.
        platform: the `linux/<arch>` to build for; None for the engine's own.

    Returns:
        The images in build order: runtime, then case and tool of each task.

    Raises:
        ImageUnavailableError: a task's folder lacks a file its config names (before
            any build), an image is missing or a build failed.
        BackendError: the engine cannot be reached.
    """
    for task in tasks:  # a task's missing file is reported before any build, the runtime's too
        _check_files(task)
    built = [build_runtime(client, home, force=force, progress=progress, platform=platform)]
    for task in tasks:
        built.append(build_case(client, task, force=force, progress=progress, platform=platform))
        built.append(
            build_tool(client, task, home, force=force, progress=progress, platform=platform)
        )
    return built
