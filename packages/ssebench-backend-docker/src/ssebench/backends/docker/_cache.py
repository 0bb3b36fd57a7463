"""SSEBench's cache folder, and its locks: one process at a time makes a given cached
thing (an image tag, a package tree).

Two processes on one machine (parallel test workers, two `ssebench run`s of one
task) would otherwise both build what neither found, twice the work, and the
later one would retag the first's image under it. The second waits here, then
finds the first's result current and uses it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ssebench.spec import settings


def cache_root() -> Path:
    """SSEBench's cache folder: `SSEBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/ssebench`."""
    explicit = os.environ.get(settings.CACHE_DIR.name)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ssebench"


@contextmanager
def cache_lock(kind: str, name: str) -> Iterator[None]:
    """Hold the machine-wide lock of `name` (of `kind`, e.g. "image") until the block ends.

    An advisory `flock` on a file under `<cache>/locks/`: the kernel releases it when
    its holder dies, so a killed build never blocks the next one.
    """
    folder = cache_root() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(name.encode()).hexdigest()[:32]
    with (folder / f"{kind}-{key}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
