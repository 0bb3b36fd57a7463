"""`ssebench`: the command every SSEBench package plugs into."""

from __future__ import annotations

from importlib import metadata

import typer

from ssebench.runner._commands_run import run_app, run_command
from ssebench.runner._commands_tasks import tasks_app
from ssebench.runner._extensions import ExtensionGroup

app = typer.Typer(
    cls=ExtensionGroup,
    name="ssebench",
    help="Run AI coding agents against security-repair tasks and grade their patches.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def installed_packages() -> list[tuple[str, str]]:
    """Every installed SSEBench distribution and its version, sorted by name."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower().startswith("ssebench-"):
            found.setdefault(name.lower(), dist.version)
    return sorted(found.items())


def _print_version(value: bool) -> None:
    if value:
        for name, version in installed_packages():
            typer.echo(f"{name} {version}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        help="Print every installed SSEBench package and its version, then exit.",
        callback=_print_version,
        is_eager=True,
    ),
) -> None:
    """Run AI coding agents against security-repair tasks and grade their patches."""


app.command("run")(run_command)
app.add_typer(tasks_app, name="tasks")


def main() -> None:
    """Entry point of the `ssebench` executable."""
    app()


def run_main() -> None:
    """Entry point of the `ssebench-run` executable: `ssebench run` on its own."""
    run_app(prog_name="ssebench-run")
