"""`ssebench`: the command every SSEBench package plugs into."""

from __future__ import annotations

import typer

from ssebench.runner._commands_dataset import dataset_app
from ssebench.runner._commands_eval import eval_command
from ssebench.runner._commands_models import models_app
from ssebench.runner._commands_report import report_command
from ssebench.runner._commands_run import run_app, run_command
from ssebench.runner._commands_scan import scan_command
from ssebench.runner._commands_tasks import tasks_app
from ssebench.runner._commands_verify import verify_command
from ssebench.runner._extensions import ExtensionGroup
from ssebench.runner._provenance import ssebench_versions

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
    return sorted(ssebench_versions().items())


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
app.command("eval")(eval_command)
app.command("report")(report_command)
app.add_typer(tasks_app, name="tasks")
dataset_app.command("verify")(verify_command)
dataset_app.command("scan")(scan_command)
app.add_typer(dataset_app, name="dataset")
app.add_typer(models_app, name="models")


def main() -> None:
    """Entry point of the `ssebench` executable."""
    app()


def run_main() -> None:
    """Entry point of the `ssebench-run` executable: `ssebench run` on its own."""
    run_app(prog_name="ssebench-run")
