"""`ssebench tool-layers`: the installed tool layers, and the contract check of one of them.

    ssebench tool-layers list [--json]
    ssebench tool-layers check NAME [--local DIR] [--tasks IDS] [--json]

`check` builds the layer for each task on the local Docker engine (the case,
runtime and built-in layers first, as a run does) and runs the tool layer
contract's checks of ssebench-conformance against each image: what a third
party runs against its own layer. It exits 1 when any check fails.
"""

from __future__ import annotations

from typing import Annotated

import click
import typer

from ssebench.backends.docker._engine import docker_client
from ssebench.backends.docker._layers import build_tool_images
from ssebench.backends.docker._tool_layers import build_extension_tool_layer
from ssebench.backends.docker.commands import (
    JsonOption,
    LocalOption,
    TasksOption,
    _fail,
    _showing_progress,
    _tasks,
)
from ssebench.spec import Message, SSEBenchError, encode_json, get_tool_layer, tool_layer_names

tool_layers_app = typer.Typer(
    name="tool-layers",
    help="The tool layers a sandbox run can be built with (`ssebench run --tool-layer`).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class ToolLayerListing(Message, frozen=True):
    """One installed tool layer as `list --json` prints it."""

    name: str
    description: str
    context: str


class CheckListing(Message, frozen=True):
    """One check against one task's build of a layer, as `check --json` prints it."""

    task: str
    image: str
    check: str
    status: str
    detail: str


@tool_layers_app.command("list")
def list_command(json_output: JsonOption = False) -> None:
    """List the installed tool layers (entry-point group `ssebench.tool_layers`)."""
    try:
        layers = [get_tool_layer(name) for name in tool_layer_names()]
    except SSEBenchError as exc:
        _fail(str(exc))
    if json_output:
        listings = [
            ToolLayerListing(name=layer.name, description=layer.description, context=layer.context)
            for layer in layers
        ]
        click.echo(encode_json(listings, pretty=True).decode(), nl=False)
        return
    for layer in layers:
        click.echo(f"{layer.name}  {layer.description}")


@tool_layers_app.command("check")
def check_command(
    name: Annotated[str, typer.Argument(help="The tool layer (see `ssebench tool-layers list`).")],
    local: LocalOption = None,
    tasks: TasksOption = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of every check's outcome.")
    ] = False,
) -> None:
    """Build a tool layer for each task and check it keeps the container contract."""
    try:
        from ssebench.conformance import docker_subject, run_tool_layer_checks
    except ImportError:
        _fail("the tool layer checks come with ssebench-conformance: install it first")
    try:
        layer = get_tool_layer(name)
        home, chosen = _tasks(local, tasks)
        client = docker_client()
        reports = []
        for task in chosen:
            with _showing_progress(f"building tool layer {name} for {task.id}") as progress:
                image = build_tool_images(client, [task], home, progress=progress)[-1]
                if not layer.builtin:
                    image = build_extension_tool_layer(
                        client, task, layer, image, progress=progress
                    )
            reports.append(
                (task.id, run_tool_layer_checks(docker_subject(image.tag, task.config, client)))
            )
    except SSEBenchError as exc:
        _fail(str(exc))
    if json_output:
        listings = [
            CheckListing(
                task=task_id, image=report.image, check=o.check, status=o.status, detail=o.detail
            )
            for task_id, report in reports
            for o in report.outcomes
        ]
        click.echo(encode_json(listings, pretty=True).decode(), nl=False)
    else:
        for _task_id, report in reports:
            click.echo(str(report))
    if not all(report.ok for _, report in reports):
        raise typer.Exit(1)
