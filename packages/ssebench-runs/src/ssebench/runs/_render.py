"""Tables for people (rich); the JSON forms never import this module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ssebench.runs._entries import CheckOutcome, FinishedRun, RunEntry

_UNLIMITED: Final = 100_000
"""A width no table reaches: measuring with it gives a table's natural width."""
_STATE_STYLE: Final = {"running": "bold green", "created": "cyan", "exited": "dim"}
_STATUS_STYLE: Final = {"passed": "bold green", "failed": "bold red", "error": "bold yellow"}
_OUTCOME_STYLE: Final = {
    **_STATUS_STYLE,
    "stopped": "dim",
    "infra_error": "bold yellow",
    "grader_error": "bold magenta",
    "budget_exceeded": "red",
    "agent_timeout": "red",
}
_CHECK_MARK: Final[dict[CheckOutcome, Text]] = {
    "passed": Text("ok", style="green"),
    "failed": Text("FAIL", style="red"),
    "not run": Text("-", style="dim"),
}


def _when(iso: str | None) -> str:
    """An ISO 8601 time as `YYYY-MM-DD HH:MM:SS`, the way people read it in a table."""
    if not iso:
        return "-"
    return iso.replace("T", " ")[:19]


def _state(run: RunEntry) -> Text:
    shown = run.state if run.exit_code is None else f"{run.state} ({run.exit_code})"
    return Text(shown, style=_STATE_STYLE.get(run.state, ""))


def runs_table(backend: str, runs: Sequence[RunEntry]) -> Table:
    """The runs of `runs list`, one row each, newest first."""
    table = Table(title=f"runs on the {backend} backend", title_justify="left", box=None)
    # The container's name is left to `inspect`.
    for heading in ("RUN ID", "STATE", "TASK", "AGENT", "MODEL", "CREATED"):
        table.add_column(heading, no_wrap=True)
    # Text, not markup: values come from labels and may hold brackets.
    for run in runs:
        table.add_row(
            Text(run.run_id, style="bold"),
            _state(run),
            Text(run.task or "-"),
            Text(run.agent or "-"),
            Text(run.model or "-"),
            Text(_when(run.created_at)),
        )
    return table


def run_table(run: RunEntry) -> Table:
    """One run for `runs inspect`: a field per row, then its labels."""
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column(style="bold")
    table.add_column()
    rows: list[tuple[str, Text]] = [
        ("run ID", Text(run.run_id)),
        ("name", Text(run.name)),
        ("state", _state(run)),
        ("image", Text(run.image)),
        ("created", Text(_when(run.created_at))),
        ("task", Text(run.task or "-")),
        ("model", Text(run.model or "-")),
        ("agent", Text(run.agent or "-")),
        ("reference run", Text("yes" if run.reference_run else "no")),
        ("run directory", Text(run.results_dir or "-")),
    ]
    rows += [(key, Text(value)) for key, value in run.labels.items()]
    for name, value in rows:
        table.add_row(name, value)
    return table


def results_table(runs: Sequence[FinishedRun]) -> Table:
    """The finished runs of `runs results`, newest first, with each check's outcome."""
    table = Table(box=None)
    for heading in ("RUN ID", "STARTED", "TASK", "AGENT", "MODEL", "STATUS", "OUTCOME"):
        table.add_column(heading, no_wrap=True)
    for heading in ("BUILD", "POC", "FUNC", "INTENT"):
        table.add_column(heading, justify="center", no_wrap=True)
    for run in runs:
        checks = run.checks
        poc = _CHECK_MARK[checks.poc].copy()
        if checks.pocs_total is not None:
            poc.append(f" {checks.pocs_fixed or 0}/{checks.pocs_total}")
        table.add_row(
            Text(run.run_id, style="bold"),
            Text(_when(run.started_at)),
            Text(run.task),
            Text(run.agent),
            Text(run.model),
            Text(run.status, style=_STATUS_STYLE.get(run.status, "")),
            Text(run.outcome or "-", style=_OUTCOME_STYLE.get(run.outcome or "", "")),
            _CHECK_MARK[checks.build],
            poc,
            _CHECK_MARK[checks.function_test],
            _CHECK_MARK[checks.intent_test],
        )
    return table


def show(table: Table) -> None:
    """Print a table on stdout, one line per row even when the terminal is narrower.

    Like `docker ps`: a cell is never cut or folded; the terminal wraps long lines.
    """
    console = Console()
    needed = console.measure(table, options=console.options.update_width(_UNLIMITED)).maximum
    if needed > console.width:
        console = Console(width=needed)
    console.print(table)
