"""Writing a file so that a reader sees the old one or the whole new one.

The one definition for every SSEBench program: the host side (the runner's
run records, the Docker backend's build files and caches) and the programs in
the container (the evaluator's `result.json`, the daemon's private results).
It lives in `ssebench.spec` because every one of those packages already
depends on it, and it imports only the standard library, so the entrypoint
and the evaluator load nothing heavy for it (`ssebench.spec` loads its other
names lazily).

A write goes to a fresh, unguessable temporary name beside the target, created
with O_EXCL|O_NOFOLLOW (never through a link someone planted, never onto
another writer's file), is fsynced, and is renamed over the target (which
replaces a link there rather than writing through it). On any failure the
temporary file is removed and the target is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

PRIVATE: Final = 0o600
"""The default permissions: only the writer's user may read the file."""

_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def atomic_file(path: Path, *, mode: int = PRIVATE) -> Iterator[BinaryIO]:
    """Open a temporary file beside `path`; when the block ends without an error it
    replaces `path`.

    Args:
        path: the final name.
        mode: the file's permissions (the umask applies, as to any new file).

    Yields:
        The open file.

    Raises:
        OSError: the file cannot be created, written or renamed (the temporary one is
            removed).
    """
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temporary, _FLAGS, mode)
    try:
        with os.fdopen(fd, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def write_atomically(path: Path, data: bytes, *, mode: int = PRIVATE) -> None:
    """Replace `path` with `data` atomically (see `atomic_file`).

    Raises:
        OSError: the file cannot be written (no temporary file is left behind).
    """
    with atomic_file(path, mode=mode) as file:
        file.write(data)
