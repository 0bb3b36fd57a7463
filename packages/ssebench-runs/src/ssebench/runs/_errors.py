"""Errors of `ssebench runs`, each with the exit status the command ends with.

    SSEBenchError (ssebench.spec)
    └── RunsError                 a command cannot do what was asked       exit 1
        ├── NoSuchRunError        no run has the ID (also LookupError)     exit 3
        ├── AmbiguousRunError     several runs have the ID (LookupError)   exit 4
        └── NotRunningError       the run must be running and is not      exit 1

Any other SSEBenchError (an unknown backend, a backend that cannot reach the
platform) ends the command with exit status 1.
"""

from __future__ import annotations

from typing import ClassVar

from ssebench.spec import SSEBenchError


class RunsError(SSEBenchError):
    """A `ssebench runs` command cannot do what was asked."""

    exit_status: ClassVar[int] = 1
    """The status the command exits with."""


class NoSuchRunError(RunsError, LookupError):
    """No run on the backend has the ID."""

    exit_status: ClassVar[int] = 3


class AmbiguousRunError(RunsError, LookupError):
    """Several runs on the backend have the ID, so it names none of them."""

    exit_status: ClassVar[int] = 4


class NotRunningError(RunsError):
    """The command needs a running run (endpoint, exec) and this one is not."""
