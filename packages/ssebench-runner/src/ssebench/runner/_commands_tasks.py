"""`ssebench tasks`: the tasks of a dataset and the checks each has."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import click
import typer

from ssebench.runner._console import fail
from ssebench.runner._lifecycle import said
from ssebench.spec import (
    Check,
    Message,
    SSEBenchError,
    Task,
    default_dataset,
    encode_json,
    find_home,
    load_dataset,
)

tasks_app = typer.Typer(
    name="tasks",
    help="The tasks of a dataset.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class TaskListing(Message, kw_only=True, frozen=True):
    """One task as `ssebench tasks list --json` prints it."""

    id: str
    project: str
    language: str
    checks: list[Check]


def task_listing(task: Task) -> TaskListing:
    """What `tasks list` shows of a task."""
    config = task.config
    return TaskListing(
        id=task.id, project=config.project, language=config.language, checks=list(config.checks())
    )


@tasks_app.command("list")
def list_tasks(
    local: Annotated[
        Path | None,
        typer.Option(
            "--local",
            metavar="DIR",
            help="A dataset folder. Default: the home's datasets/demo.",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of the tasks on stdout.")
    ] = False,
) -> None:
    """List a dataset's tasks with the checks each has."""
    try:
        dataset = local if local is not None else default_dataset(find_home())
        listings = [task_listing(task) for task in load_dataset(dataset)]
    except SSEBenchError as exc:
        fail(said(exc))
    if json_output:
        click.echo(encode_json(listings, pretty=True).decode(), nl=False)
        return
    # Here, not at the top: rich costs every ssebench command start-up time.
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=str(dataset), title_justify="left")
    for column in ("task", "language", "project", "checks"):
        table.add_column(column)
    for listing in listings:
        table.add_row(
            Text(listing.id),
            Text(listing.language),
            Text(listing.project),
            Text(", ".join(listing.checks) or "none"),
        )
    Console().print(table)
