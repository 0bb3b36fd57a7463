"""Reading the files of a run directory for the page, safely.

Run directories hold what the run's container wrote, and `archive/` what the
agent wrote: nothing here follows a symbolic link, blocks on a FIFO or reads
more than a bounded size, and every text is shown by the page as text.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Final

MAX_TEXT: Final = 4 << 20
"""The most of one file the page shows (a check's log, the diff, the dialog)."""

CHECK_LOG: Final = re.compile(r"check-(\d+)-([A-Za-z0-9_]+)\.log")
"""The log of one check the evaluator ran, e.g. check-0002-run_poc.log."""

FINAL_DIFF: Final = "final.patch"
"""The agent's final diff, as the run recorded it."""


def read_text(folder: Path, *names: str, limit: int = MAX_TEXT) -> str | None:
    """The text of `folder/names...`, at most `limit` bytes; None if it is not a plain file.

    Each component is opened without following symbolic links.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        descriptor = os.open(folder, flags | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for index, name in enumerate(names):
            last = index == len(names) - 1
            child = os.open(name, flags | (0 if last else os.O_DIRECTORY), dir_fd=descriptor)
            os.close(descriptor)
            descriptor = child
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        chunks: list[bytes] = []
        left = limit
        while left > 0 and (chunk := os.read(descriptor, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(descriptor)


def check_logs(folder: Path) -> list[tuple[str, str]]:
    """Each check's log in the run directory, in the order the checks ran: (name, file)."""
    try:
        names = [path.name for path in folder.iterdir()]
    except OSError:
        return []
    found = []
    for name in names:
        match = CHECK_LOG.fullmatch(name)
        if match is not None:
            found.append((int(match.group(1)), match.group(2), name))
    return [(check, name) for _, check, name in sorted(found)]
