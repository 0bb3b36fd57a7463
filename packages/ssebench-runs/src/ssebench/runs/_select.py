"""Choosing the backend as `ssebench run` does, and finding one run on it by its ID."""

from __future__ import annotations

from typing import Any, Final

from ssebench.runs._errors import AmbiguousRunError, NoSuchRunError
from ssebench.spec import Backend, RunInfo, get_backend, labels

LISTED: Final = {labels.WEBUI: "true"}
"""The label every run `ssebench runs` shows carries (the runner sets it on each run)."""


def open_backend(name: str) -> Backend[Any]:
    """The backend registered under `name`; only its entry point is imported.

    Raises:
        UnknownBackendError: no usable backend has that name.
    """
    return get_backend(name)


def list_runs(backend: Backend[Any]) -> list[RunInfo]:
    """The runs `ssebench runs` shows, running or not, newest first.

    Raises:
        BackendError: the platform cannot be asked.
    """
    runs = backend.list_runs(dict(LISTED))
    return sorted(runs, key=lambda run: run.created_at or "", reverse=True)


def find_run(backend: Backend[Any], run_id: str) -> RunInfo:
    """The one listed run with that ID.

    Args:
        backend: where to look.
        run_id: the run's ID (its `ssebench.run-id` label).

    Returns:
        The run.

    Raises:
        NoSuchRunError: no run has the ID (exit status 3).
        AmbiguousRunError: several runs have it (exit status 4).
        BackendError: the platform cannot be asked.
    """
    found = backend.list_runs({labels.RUN_ID: run_id, **LISTED})
    if not found:
        raise NoSuchRunError(f"no run has the ID {run_id!r} on the {backend.name} backend")
    if len(found) > 1:
        names = ", ".join(sorted(run.name for run in found))
        raise AmbiguousRunError(
            f"{len(found)} runs have the ID {run_id!r} on the {backend.name} backend "
            f"({names}); remove all but one to name it"
        )
    return found[0]
