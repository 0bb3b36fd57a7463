"""Commands the Docker backend contributes to `ssebench` (entry-point group `ssebench.commands`).

    ssebench build-case [--local DIR] [--tasks IDS] [--force] [--json]
    ssebench images bootstrap-base [--force]
    ssebench images build-tool [--local DIR] [--tasks IDS] [--force] [--json]
    ssebench images push [--local DIR] [--tasks IDS] [--agents NAMES]
                         [--mode sandbox|sidecar|both] [--force] [--json]
    ssebench images prune [--dry-run] [--json]

Results go to stdout (`--json`: a JSON list), progress and errors to stderr.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import click
import typer
from rich.console import Console
from rich.markup import escape

from ssebench.backends.docker._base_image import bootstrap_base_image
from ssebench.backends.docker._build import BuildLine, BuiltImage, Progress
from ssebench.backends.docker._engine import docker_client
from ssebench.backends.docker._layers import build_case, build_tool_images
from ssebench.spec import (
    Agent,
    Message,
    SSEBenchError,
    Task,
    base_image,
    default_dataset,
    encode_json,
    find_agent,
    find_home,
    find_task,
    list_agents,
    load_dataset,
    registry,
    runtime_version,
)

images_app = typer.Typer(
    name="images",
    help="Manage SSEBench's images on the local Docker engine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

build_case_app = typer.Typer(
    name="build-case",
    help="Build the case images of a dataset's tasks.",
    add_completion=False,
    pretty_exceptions_enable=False,
)

_stderr = Console(stderr=True)


class ImageListing(Message, frozen=True):
    """One image as `--json` prints it."""

    layer: str
    image: str
    id: str
    steps: int
    rebuilt_steps: int
    cached: bool


def _fail(message: str) -> NoReturn:
    # soft_wrap: one line, however narrow the terminal (rich would break it at its width).
    _stderr.print(f"ssebench: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(1)


LocalOption = Annotated[
    Path | None,
    typer.Option(
        "--local",
        help="The dataset folder (default: the home's datasets/demo).",
        file_okay=False,
    ),
]
TasksOption = Annotated[
    str | None,
    typer.Option("--tasks", help="Comma-separated task IDs (default: every task)."),
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Rebuild every step instead of reusing the engine's cache.")
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print a JSON list of the images on stdout.")
]


def _tasks(local: Path | None, ids: str | None) -> tuple[Path, list[Task]]:
    """The home and the chosen tasks; any unknown ID ends the command with one line."""
    home = find_home()
    dataset = local.resolve() if local is not None else default_dataset(home)
    if ids is None:
        return home, load_dataset(dataset)
    wanted = [part.strip() for part in ids.split(",") if part.strip()]
    if not wanted:
        raise typer.BadParameter("name at least one task ID", param_hint="--tasks")
    return home, [find_task(dataset, task_id) for task_id in wanted]


@contextmanager
def _showing_progress(what: str) -> Iterator[Progress]:
    """A progress callback: a live status line on a terminal, step lines otherwise."""
    live = _stderr.is_terminal
    with _stderr.status(escape(what)) as status:

        def progress(line: BuildLine) -> None:
            text = line.text.strip()
            if line.step is not None and line.step.cached:
                return
            if live:
                status.update(escape(f"{line.layer}: {text}"[:150]))
            elif line.step is not None:
                _stderr.print(f"{line.layer}: {line.step}", markup=False, soft_wrap=True)

        yield progress


def _report(images: list[BuiltImage], json_output: bool) -> None:
    if json_output:
        listings = [
            ImageListing(
                layer=image.layer,
                image=image.tag,
                id=image.image_id,
                steps=sum(1 for step in image.steps if step.produced and not step.is_from),
                rebuilt_steps=len(image.rebuilt),
                cached=image.cached,
            )
            for image in images
        ]
        click.echo(encode_json(listings, pretty=True).decode(), nl=False)
        return
    for image in images:
        ran = len(image.rebuilt)
        state = "up to date (every step cached)" if image.cached else f"built ({ran} steps ran)"
        click.echo(f"{image.tag}  {state}")


@build_case_app.command()
def build_case_command(
    local: LocalOption = None,
    tasks: TasksOption = None,
    force: ForceOption = False,
    json_output: JsonOption = False,
) -> None:
    """Build the case images of a dataset's tasks; only what changed unless --force."""
    try:
        _home, chosen = _tasks(local, tasks)
        client = docker_client()
        with _showing_progress("building case images") as progress:
            images = [build_case(client, task, force=force, progress=progress) for task in chosen]
    except SSEBenchError as exc:
        _fail(str(exc))
    _report(images, json_output)


@images_app.callback()
def _images() -> None:
    """Manage SSEBench's images on the local Docker engine."""


@images_app.command("bootstrap-base")
def bootstrap_base(
    force: bool = typer.Option(False, "--force", help="Rebuild even if the image exists."),
) -> None:
    """Build the base image (SSEBENCH_BASE_IMAGE) offline from Debian packages if it is missing."""
    name = base_image()
    try:
        client = docker_client()
        with _stderr.status(f"bootstrapping {name} from Debian packages") as status:

            def progress(line: str) -> None:
                status.update(escape(f"bootstrapping {name}: {line[:100]}"))

            built = bootstrap_base_image(client, name, force=force, progress=progress)
    except SSEBenchError as exc:
        _fail(str(exc))
    if built:
        _stderr.print(f"built base image {name}", markup=False, highlight=False)
    else:
        _stderr.print(f"base image {name} already exists", markup=False, highlight=False)


@images_app.command("build-tool")
def build_tool_command(
    local: LocalOption = None,
    tasks: TasksOption = None,
    force: ForceOption = False,
    json_output: JsonOption = False,
) -> None:
    """Build the runtime, then each task's case image and tool layer; only what changed."""
    try:
        home, chosen = _tasks(local, tasks)
        client = docker_client()
        with _showing_progress("building tool layers") as progress:
            images = build_tool_images(client, chosen, home, force=force, progress=progress)
    except SSEBenchError as exc:
        _fail(str(exc))
    _report(images, json_output)


AgentsOption = Annotated[
    str | None,
    typer.Option("--agents", help="Comma-separated agent names (default: every agent)."),
]


def _agents(home: Path, names: str | None) -> list[Agent]:
    if names is None:
        return list_agents(home)
    wanted = [part.strip() for part in names.split(",") if part.strip()]
    if not wanted:
        raise typer.BadParameter("name at least one agent", param_hint="--agents")
    return [find_agent(home, name) for name in wanted]


@images_app.command("push")
def push_command(
    local: LocalOption = None,
    tasks: TasksOption = None,
    agents: AgentsOption = None,
    mode: Annotated[
        str,
        typer.Option("--mode", metavar="[sandbox|sidecar|both]", help="Which images to publish."),
    ] = "sandbox",
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Replace a tag the registry holds with another image (another daemon)."
        ),
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of the published images on stdout.")
    ] = False,
) -> None:
    """Build what is missing and push each agent-and-task image under SSEBENCH_REGISTRY.

    SSEBENCH_REGISTRY must name a registry host (host[:port]/prefix). Credentials,
    if the registry needs any, are the engine's own (`docker login`).
    """
    from ssebench.backends.docker._publish import publish, push_modes, push_registry

    try:
        push_registry()
        modes = push_modes(mode)
        home, chosen = _tasks(local, tasks)
        chosen_agents = _agents(home, agents)
        client = docker_client()

        def say(line: str) -> None:
            _stderr.print(line, markup=False, highlight=False, soft_wrap=True)

        with _showing_progress("building images to push") as progress:
            published = publish(
                client,
                chosen,
                chosen_agents,
                home,
                modes=modes,
                force=force,
                progress=progress,
                say=say,
            )
    except SSEBenchError as exc:
        _fail(str(exc))
    if json_output:
        click.echo(encode_json(published, pretty=True).decode(), nl=False)
        return
    for image in published:
        click.echo(f"{image.image}  {image.state}  {image.digest}")


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


@images_app.command("prune")
def prune_command(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of the images on stdout.")
    ] = False,
) -> None:
    """Remove the images of SSEBENCH_REGISTRY that no current daemon or agent version needs.

    Only images named under the active SSEBENCH_REGISTRY prefix (or built under it
    and since replaced) are touched.
    """
    from ssebench.backends.docker._prune import prune_images

    try:
        home = find_home()
        versions = {agent.name: agent.version for agent in list_agents(home)}
        client = docker_client()
        report = prune_images(client, versions, runtime_version(), dry_run=dry_run)
    except SSEBenchError as exc:
        _fail(str(exc))
    if json_output:
        click.echo(encode_json(report.images, pretty=True).decode(), nl=False)
    else:
        for entry in report.images:
            state = "would remove" if dry_run else "removed" if entry.removed else "kept"
            note = f" ({entry.error})" if entry.error else ""
            click.echo(f"{state} {entry.image}: {entry.reason}{note}")
    if dry_run:
        summary = f"would free about {_size(report.would_free)} ({len(report.images)} names)"
    else:
        removed = sum(1 for entry in report.images if entry.removed)
        summary = f"freed about {_size(report.freed)} ({removed} names removed)"
    _stderr.print(f"{registry()}: {summary}", markup=False, highlight=False)
