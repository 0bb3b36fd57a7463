"""Capturing what this process writes to its stdout and stderr, at the file-descriptor level.

A backend relays a run's output to this process's stdout and stderr, from
Python (`sys.stdout.buffer`) or from a child process writing to fd 1 and 2;
both land in the capture. Works inside pytest's own capturing, which it
suspends and restores.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Captured:
    """What was written while capturing; filled in when the block ends."""

    out: str = ""
    err: str = ""


@contextmanager
def capture_output() -> Iterator[Captured]:
    """Capture fd 1 and 2 (and `sys.stdout`, `sys.stderr`) for the block."""
    captured = Captured()
    streams = (sys.stdout, sys.stderr)
    for stream in streams:
        stream.flush()
    files = [tempfile.TemporaryFile() for _ in range(2)]  # noqa: SIM115 (closed in finally)
    saved = [os.dup(1), os.dup(2)]
    wrappers = []
    try:
        for fd, file in zip((1, 2), files, strict=True):
            os.dup2(file.fileno(), fd)
        for fd in (1, 2):
            wrapper = open(fd, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            wrapper.reconfigure(line_buffering=True, write_through=True)
            wrappers.append(wrapper)
        sys.stdout, sys.stderr = wrappers
        yield captured
    finally:
        for wrapper in wrappers:
            wrapper.flush()
        sys.stdout, sys.stderr = streams
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
        texts = []
        for file in files:
            file.seek(0)
            texts.append(file.read().decode("utf-8", errors="replace"))
            file.close()
        captured.out, captured.err = texts
