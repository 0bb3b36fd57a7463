"""`ssebench run` (also `ssebench-run`): run one agent against one task and record the grade."""

from __future__ import annotations

import contextlib
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import click
import typer

from ssebench.runner._console import fail, log_to_stderr, stdout_to_stderr
from ssebench.runner._lifecycle import Runner, said, utc_now
from ssebench.runner._options import EGRESS_ENV, OFFERED_MODES
from ssebench.runner._plan import RunOptions, RunPlan, plan_run
from ssebench.runner._run_dir import RESULTS_ROOT
from ssebench.runner._signals import SecondSignal
from ssebench.spec import (
    BACKEND_ENV,
    DEFAULT_BACKEND,
    PatchResult,
    SSEBenchError,
    Summary,
    UserError,
    contract,
    encode_json,
    get_backend,
)
from ssebench.spec.terminal import terminal_safe

if TYPE_CHECKING:
    from rich.table import Table

log = logging.getLogger(__name__)

_STATUS_STYLE = {"passed": "bold green", "failed": "bold red", "error": "bold yellow"}


def run_command(
    task: Annotated[
        str | None, typer.Option("--task", help="The task to run, by its ID.", show_default=False)
    ] = None,
    local: Annotated[
        Path | None,
        typer.Option(
            "--local",
            metavar="DIR",
            help="A dataset folder. Default: the home's datasets/demo.",
            show_default=False,
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="The agent: a folder with an agent.yaml under <home>/agents/ or on "
            "SSEBENCH_AGENT_PATH.",
            show_default=False,
        ),
    ] = None,
    mode: Annotated[
        str, typer.Option("--mode", metavar="[" + "|".join(OFFERED_MODES) + "]", help="How to run.")
    ] = OFFERED_MODES[0],
    backend: Annotated[
        str,
        typer.Option("--backend", envvar=BACKEND_ENV, help="The container platform to run on."),
    ] = DEFAULT_BACKEND,
    difficulty: Annotated[
        int,
        typer.Option(
            "--difficulty",
            help="0-4: which checks the agent may run itself (0 all, 4 none).",
        ),
    ] = contract.DEFAULT_DIFFICULTY,
    timeout: Annotated[int, typer.Option("--timeout", help="Seconds the agent may run.")] = 3600,
    check_timeout: Annotated[
        int,
        typer.Option(
            "--check-timeout",
            help="Seconds each check (build, a PoC, tests) may run before it is stopped and fails.",
        ),
    ] = contract.DEFAULT_CHECK_TIMEOUT,
    egress: Annotated[
        str,
        typer.Option(
            "--egress",
            envvar=EGRESS_ENV,
            metavar="[restricted|open]",
            help="restricted: the model proxy only; open: also the internet.",
        ),
    ] = "restricted",
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            help="1-64 of letters, digits, '.', '_', '-', starting with a letter or digit. "
            "Default: the UTC start time and random hex, so IDs sort by time.",
            show_default=False,
        ),
    ] = None,
    keep_container: Annotated[
        bool,
        typer.Option(
            "--keep-container",
            help="Leave the container running after grading; ssebench returns once the "
            "run is recorded.",
        ),
    ] = False,
    require_pass: Annotated[
        bool, typer.Option("--require-pass", help="Exit with status 1 unless the run passed.")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the run's summary as JSON on stdout.")
    ] = False,
) -> None:
    """Run an agent against a task in a container, grade its patch and record the run.

    The run is recorded in results/<task>/<model>/<agent>/<run-id>/ under the
    current directory, whatever happens to its container.
    """
    options = RunOptions(
        task=task,
        agent=agent,
        backend=backend,
        local=local,
        mode=mode,
        difficulty=difficulty,
        timeout=timeout,
        check_timeout=check_timeout,
        egress=egress,
        run_id=run_id,
        keep=keep_container,
    )
    try:
        plan = plan_run(options, results_root=RESULTS_ROOT, now=utc_now())
        chosen = get_backend(plan.config.backend)
        if not (chosen.builds_images or plan.prebuilt):
            raise UserError(
                f"backend {plan.config.backend!r} cannot build images and runs prebuilt "
                "images only, which ssebench run cannot ask for yet; use a backend that builds"
            )
    except SSEBenchError as exc:
        fail(said(exc))
    quiet = stdout_to_stderr() if json_output else contextlib.nullcontext()
    try:
        with log_to_stderr(), quiet:
            summary = Runner(chosen).run(plan)
            if plan.config.keep:
                log.info("the container is kept: stop it with `ssebench runs stop %s`", plan.run_id)
    except SecondSignal as interrupt:
        fail(f"ended by {interrupt}; the run is recorded in {plan.run_dir}", interrupt.exit_status)
    except KeyboardInterrupt:
        # Before the run's container starts, or a third signal: nothing to stop or record.
        fail("interrupted", 128 + signal.SIGINT)
    except (SSEBenchError, OSError) as exc:
        fail(said(exc))
    if json_output:
        click.echo(encode_json(summary, pretty=True).decode(), nl=False)
    else:
        from rich.console import Console  # here: `--json` runs never need rich

        Console().print(summary_table(summary, plan))
    if require_pass and summary.patch_result.status != "passed":
        raise typer.Exit(1)


def _check(success: bool | None) -> str:
    if success is None:
        return "not run"
    return "passed" if success else "failed"


def _pocs(result: PatchResult) -> str:
    if result.pov_total is None:
        return "not run"
    return f"{result.pov_passed or 0} of {result.pov_total} fixed"


def summary_table(summary: Summary, plan: RunPlan) -> Table:
    """A short table of a recorded run: what ran, its grade, each check, where it is.

    Args:
        summary: the run's summary.
        plan: the run's plan, for its directory.

    Returns:
        A two-column rich table.
    """
    from rich.table import Table
    from rich.text import Text

    result = summary.patch_result
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column(style="bold")
    table.add_column()
    # Text, not markup: values such as an error message may hold brackets.
    rows = [
        ("task", Text(summary.task)),
        ("agent", Text(f"{summary.config.agent} {plan.agent.version}")),
        ("model", Text(summary.config.model)),
        ("status", Text(result.status, style=_STATUS_STYLE[result.status])),
        ("outcome", Text(summary.outcome or "-")),
        ("build", Text(_check(result.build_success))),
        ("poc", Text(_pocs(result))),
        ("function_test", Text(_check(result.func_test_success))),
        ("intent_test", Text(_check(result.intent_test_success))),
    ]
    if result.error_msg:
        rows.append(("error", Text(terminal_safe(result.error_msg), style="yellow")))
    rows.append(("run directory", Text(str(_relative(plan.run_dir)))))
    for name, value in rows:
        table.add_row(name, value)
    return table


def _relative(path: Path) -> Path:
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


run_app = typer.Typer(
    name="ssebench-run",
    add_completion=False,
    pretty_exceptions_enable=False,
)
run_app.command()(run_command)
