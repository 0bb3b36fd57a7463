"""The run directory `results/<task>/<model>/<agent>/<run-id>/` and the `latest` link beside it."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Final

from ssebench.runner._options import RESERVED_RUN_ID
from ssebench.spec import UserError, contract

log = logging.getLogger(__name__)

REFERENCE_FILE: Final = "reference.patch"
"""The task's reference fix, copied in after every run."""


def run_dir_path(root: Path, task_id: str, model: str, agent: str, run_id: str) -> Path:
    """Where a run's directory goes, as an absolute path.

    Args:
        root: the results folder, usually `results/` in the current directory.
        task_id: the task.
        model: the model, or `none`.
        agent: the agent's name.
        run_id: the run's ID.

    Returns:
        `<root>/<task>/<model>/<agent>/<run-id>`, absolute.
    """
    return (root / task_id / model / agent / run_id).absolute()


def check_run_dir_free(run_dir: Path) -> None:
    """Make sure a run directory can be created.

    Raises:
        UserError: something already exists at that path.
    """
    if run_dir.exists() or run_dir.is_symlink():
        raise UserError(
            f"run directory {_shown(run_dir)} already exists: choose another --run-id "
            "or leave it out for a fresh one"
        )


def create_run_dir(run_dir: Path) -> None:
    """Create the run directory's skeleton and point `latest` at it.

    The skeleton is what a backend that keeps results in its own storage finds
    in `dest` (see `Backend.collect_results`): `archive/` and an empty
    `result.json`.

    Args:
        run_dir: the absolute path from `run_dir_path`.

    Raises:
        UserError: the run directory already exists (another run took the ID
            since it was checked) or cannot be created.
    """
    try:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        run_dir.mkdir()
    except FileExistsError as exc:
        raise UserError(f"run directory {_shown(run_dir)} already exists") from exc
    except OSError as exc:
        raise UserError(f"cannot create run directory {_shown(run_dir)}: {exc.strerror}") from exc
    (run_dir / contract.RUN_ARCHIVE).mkdir()
    (run_dir / contract.RESULT_FILE).touch()
    try:
        point_latest(run_dir)
    except OSError as exc:
        # The link is a convenience; a run must not fail over it.
        latest = run_dir.parent / RESERVED_RUN_ID
        log.warning("cannot point %s at this run: %s", latest, exc.strerror)


def point_latest(run_dir: Path) -> None:
    """Make `<parent>/latest` a relative link to `run_dir`, replacing the old one atomically.

    Readers never see a missing `latest`: the new link is made under a
    temporary name and renamed over the old one.

    Raises:
        OSError: the link cannot be made (for example, `latest` is a folder).
    """
    latest = run_dir.parent / RESERVED_RUN_ID
    temporary = run_dir.parent / f".{RESERVED_RUN_ID}-{secrets.token_hex(4)}"
    temporary.symlink_to(run_dir.name)
    try:
        temporary.replace(latest)
    except OSError:
        temporary.unlink()
        raise


def _shown(path: Path) -> str:
    """The path relative to the current directory when it is below it, as users typed it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
