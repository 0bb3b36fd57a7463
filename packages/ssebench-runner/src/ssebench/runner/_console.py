"""What the commands print, and where: results on stdout, everything else on stderr.

Messages may quote what a run produced (an engine's error, a path in the
agent's tree): every line printed here goes through `terminal_safe`, so no
control character reaches the terminal (docs/integrity.md, "What reaches the
host is tamed"). The container's own output is filtered by the backend that
streams it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import NoReturn

import click
import typer
from typing_extensions import override

from ssebench.spec.terminal import terminal_safe

PROGRAM = "ssebench"
"""How every line ssebench prints on stderr starts."""


def fail(message: str, status: int = 1) -> NoReturn:
    """End the command with one line on stderr.

    Args:
        message: what went wrong and what is allowed.
        status: the exit status.

    Raises:
        typer.Exit: always, with `status`.
    """
    click.echo(f"{PROGRAM}: {terminal_safe(message)}", err=True)
    raise typer.Exit(status)


class _StderrHandler(logging.Handler):
    """Writes records to whatever `sys.stderr` is at the time, one line each."""

    @override
    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(f"{PROGRAM}: {terminal_safe(self.format(record))}", err=True)
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def log_to_stderr(logger_name: str = "ssebench.runner") -> Iterator[None]:
    """Show the runner's progress and warnings on stderr while entered."""
    logger = logging.getLogger(logger_name)
    handler = _StderrHandler()
    previous_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send stdout to stderr while entered, also what child processes write to it.

    With `--json` stdout carries the summary alone, yet a backend streams the
    container's output to this process's stdout; this moves that to stderr.
    """
    sys.stdout.flush()
    if sys.__stdout__ is not None:
        sys.__stdout__.flush()
    try:
        saved: int | None = os.dup(1)
    except OSError:
        saved = None
    if saved is not None:
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if sys.__stdout__ is not None:
            sys.__stdout__.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
