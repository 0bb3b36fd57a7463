"""The marker a person leaves in a run directory by running commands in its container.

The web terminal and `ssebench runs exec` call `mark_touched` before they start a
command; the runner calls `touched_at` when it records the run, so that a grade a
person may have helped is marked `touched` in `summary.json` (docs/results.md). The
first time is kept: later marks do not move it.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Final

from ssebench.spec.contract import TOUCHED_FILE

_MAX_SIZE: Final = 64
"""An ISO 8601 time is about 30 bytes; more is not a marker this module wrote."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def mark_touched(run_dir: Path) -> str:
    """Record that a person is about to run a command in the run's container.

    Args:
        run_dir: the run's directory on this machine.

    Returns:
        When the run was first touched (now, or an earlier mark's time).

    Raises:
        OSError: the marker cannot be written (the caller must then not run the command).
    """
    path = run_dir / TOUCHED_FILE
    when = _now()
    try:
        # O_EXCL keeps the first time; O_NOFOLLOW never writes through a planted link.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return touched_at(run_dir) or when
    try:
        os.write(descriptor, when.encode())
    finally:
        os.close(descriptor)
    return when


def touched_at(run_dir: Path) -> str | None:
    """When a person first ran a command in the run's container, or None if nobody did."""
    try:
        descriptor = os.open(run_dir / TOUCHED_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError:
        # Something is there that this module did not write as it writes: still a mark.
        return "unknown"
    try:
        text = os.read(descriptor, _MAX_SIZE).decode(errors="replace").strip()
    finally:
        os.close(descriptor)
    return text or "unknown"
