"""`ssebench tasks`: the tasks of a dataset and the checks each has."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import click
import typer

from ssebench.runner._console import PROGRAM, fail
from ssebench.runner._lifecycle import said
from ssebench.spec import (
    Check,
    Message,
    SSEBenchError,
    TaskCheck,
    check_dataset,
    default_dataset,
    encode_json,
    find_home,
)
from ssebench.spec.terminal import terminal_safe

tasks_app = typer.Typer(
    name="tasks",
    help="The tasks of a dataset.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class TaskListing(Message, kw_only=True, frozen=True):
    """One task as `ssebench tasks list --json` prints it; a broken task (any `problems`)
    has no project, language or checks when its config cannot be read."""

    id: str
    project: str | None
    language: str | None
    checks: list[Check]
    problems: list[str]
    """Everything found wrong before a build, by the task folder's own paths."""


def task_listing(found: TaskCheck) -> TaskListing:
    """What `tasks list` shows of a task."""
    config = found.task.config if found.task is not None else None
    return TaskListing(
        id=found.id,
        project=config.project if config else None,
        language=config.language if config else None,
        checks=list(config.checks()) if config else [],
        problems=found.problems,
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
    """List a dataset's tasks with the checks each has, and every broken task with why.

    Exit status 1 when any task is broken (after listing them all).
    """
    try:
        dataset = local if local is not None else default_dataset(find_home())
        listings = [task_listing(found) for found in check_dataset(dataset)]
    except SSEBenchError as exc:
        fail(said(exc))
    broken = [listing for listing in listings if listing.problems]
    if json_output:
        click.echo(encode_json(listings, pretty=True).decode(), nl=False)
    else:
        _print_table(dataset, listings)
    for listing in broken:
        for problem in listing.problems:
            line = f"{PROGRAM}: task {listing.id}: {problem}"
            click.echo(terminal_safe(line), err=True)
    if broken:
        raise typer.Exit(1)


def _print_table(dataset: Path, listings: list[TaskListing]) -> None:
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
            Text(listing.language or "?"),
            Text(listing.project or "?"),
            Text(
                f"broken: {len(listing.problems)} problem(s), below"
                if listing.problems
                else ", ".join(listing.checks) or "none"
            ),
        )
    Console().print(table)
