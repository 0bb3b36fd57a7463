"""Where `ssebench runs` prints: answers on stdout, one-line errors and warnings on stderr."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import Final, NoReturn

import click
import typer

from ssebench.runs._errors import RunsError
from ssebench.spec import SSEBenchError, encode_json

PROGRAM: Final = "ssebench runs"
"""How every line `ssebench runs` prints on stderr starts."""

INTERRUPTED: Final = 128 + signal.SIGINT
"""The exit status after Ctrl-C, as a shell reports a process that SIGINT ended."""


def fail(message: str, status: int = 1) -> NoReturn:
    """End the command with one line on stderr.

    Raises:
        typer.Exit: always, with `status`.
    """
    click.echo(f"{PROGRAM}: {message}", err=True)
    raise typer.Exit(status)


def warn(message: str) -> None:
    """Tell the user about something skipped, on one line of stderr."""
    click.echo(f"{PROGRAM}: warning: {message}", err=True)


def say(message: str) -> None:
    """Report what was done, on one line of stderr (stdout carries answers only)."""
    click.echo(f"{PROGRAM}: {message}", err=True)


def write_json(value: object) -> None:
    """Print a Struct (or plain data) as indented JSON on stdout."""
    stream = sys.stdout
    stream.flush()
    stream.buffer.write(encode_json(value, pretty=True))
    stream.buffer.flush()


def silence_stdout() -> None:
    """Point stdout at /dev/null, so nothing complains when the closed pipe is flushed at exit."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)


@contextlib.contextmanager
def reported() -> Iterator[None]:
    """Turn errors raised inside into one line on stderr and the matching exit status.

    A reader that closed its end of stdout (`| head -1`) ends the command
    quietly with status 0; Ctrl-C (`logs --follow`) quietly with 130.
    """
    try:
        yield
    except BrokenPipeError:
        silence_stdout()
        raise typer.Exit(0) from None
    except KeyboardInterrupt:
        raise typer.Exit(INTERRUPTED) from None
    except RunsError as exc:
        fail(str(exc), exc.exit_status)
    except SSEBenchError as exc:
        fail(str(exc) or type(exc).__name__)
