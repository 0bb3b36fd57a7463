"""What `ssebench eval` shows while it runs: a live progress line, a line per finished run.

The runs' containers print too (a backend relays their output to this
process's stdout and stderr); with several runs at once that would tear the
display apart, so while the display is up the process's own `sys.stdout` and
`sys.stderr` go nowhere. Each run keeps its output in its run directory's logs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from typing_extensions import override

from ssebench.runner._console import PROGRAM
from ssebench.runner._evaluate import Finished, Progress
from ssebench.spec.terminal import terminal_safe

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as Bar
    from rich.progress import TaskID

_STYLE = {
    "passed": "green",
    "failed": "red",
    "infra_error": "yellow",
    "grader_error": "magenta",
    "stopped": "yellow",
}


class _ConsoleHandler(logging.Handler):
    def __init__(self, console: Console) -> None:
        super().__init__()
        self._console = console

    @override
    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._console.print(
                f"{PROGRAM}: {terminal_safe(self.format(record))}", markup=False, highlight=False
            )
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def _streams_to_nowhere() -> Iterator[None]:
    saved = sys.stdout, sys.stderr
    with open(os.devnull, "w") as nowhere:  # noqa: PTH123 (a text stream with a buffer)
        sys.stdout = sys.stderr = nowhere
        try:
            yield
        finally:
            sys.stdout, sys.stderr = saved


class EvalDisplay:
    """The live progress of an evaluation, on the stderr the command started with."""

    def __init__(self, total: int, skipped: int, stream: IO[str] | None = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console: Console = Console(file=stream or sys.stderr, highlight=False)
        self._bar: Bar = Progress(
            TextColumn("eval"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=self.console,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._task: TaskID = self._bar.add_task(
            "eval", total=total, completed=skipped, status=self._status(None, skipped)
        )
        self._skipped = skipped

    @staticmethod
    def _status(progress: Progress | None, skipped: int) -> str:
        if progress is None:
            return f"running 0 · passed 0 · skipped {skipped}"
        return (
            f"running {progress.running} · left {progress.left} · passed {progress.passed} · "
            f"skipped {progress.skipped}"
        )

    def update(self, progress: Progress, finished: Finished | None) -> None:
        """Show `progress`; print a line for the run that just finished, if one did."""
        self._bar.update(
            self._task,
            completed=progress.skipped + progress.done,
            status=self._status(progress, self._skipped),
        )
        if finished is not None:
            self.console.print(finished_line(finished), highlight=False)

    @contextlib.contextmanager
    def shown(self) -> Iterator[None]:
        """Show the display, the runner's warnings above it, and nothing the containers print."""
        logger = logging.getLogger("ssebench.runner")
        handler = _ConsoleHandler(self.console)
        previous = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
        try:
            with self._bar, _streams_to_nowhere():
                yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(previous)


def finished_line(finished: Finished) -> Any:
    """One line for a finished cell: its name, outcome and run directory (rich Text)."""
    from rich.text import Text

    slot = finished.slot
    outcome = "not recorded"
    if finished.summary is not None:
        outcome = finished.summary.outcome or "no outcome"
    line = Text(f"{slot.task} {slot.agent} {slot.model} #{slot.repeat}: ")
    line.append(outcome, style=_STYLE.get(outcome, "bold"))
    if finished.attempts > 1:
        line.append(f" (after {finished.attempts} attempts)")
    if finished.error:
        line.append(f" {terminal_safe(finished.error)}", style="yellow")
    return line
