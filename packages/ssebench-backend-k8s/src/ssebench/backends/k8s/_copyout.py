"""Copying a run's results out of a tar stream into the run directory, tamed.

The tree came from the pod, where the agent could write its archive: it may
hold links, devices, hard links, setuid files, names with `..` and huge files.
What reaches the run directory follows the rules of docs/integrity.md ("What
reaches the host is tamed"), the same the entrypoint's hand-over applies on
Docker: regular files and directories only (no links of any kind, no special
files), permission bits masked to 0755 (no setuid/setgid/sticky, no group or
other write), every file capped at `FILE_LIMIT` bytes and the whole at
`TOTAL_LIMIT`, with a marker saying what was dropped. Member names go through
`tarfile.data_filter` (no absolute paths, nothing outside the destination).
Files are written with O_NOFOLLOW|O_EXCL after the old entry is removed, so a
name never follows a link that already sits in the run directory.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tarfile
from pathlib import Path
from typing import IO, Final

from typing_extensions import override

from ssebench.spec import contract

FILE_LIMIT: Final = 256 * 1024 * 1024
"""The largest file copied whole; the rest is dropped with the cap marker."""

TOTAL_LIMIT: Final = 1024 * 1024 * 1024
"""What one run may bring into its run directory in all."""

MODE_MASK: Final = 0o755
_CHUNK: Final = 1024 * 1024


class CopyReport:
    """What the copy left out, for one line in the runner's log."""

    def __init__(self) -> None:
        self.refused: list[str] = []
        self.capped: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.refused or self.capped)

    @override
    def __str__(self) -> str:
        parts = []
        if self.refused:
            parts.append(f"left out {len(self.refused)} links or special files")
        if self.capped:
            parts.append(f"capped {len(self.capped)} files")
        return "; ".join(parts)


def _write_capped(source: IO[bytes], target: Path, size: int, budget: int, mode: int) -> int:
    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
        if not stat.S_ISDIR(os.lstat(target).st_mode):
            target.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    keep = min(size, budget, FILE_LIMIT)
    with os.fdopen(os.open(target, flags, mode & MODE_MASK), "wb") as out:
        left = keep
        while left > 0:
            chunk = source.read(min(_CHUNK, left))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)
        if keep < size:
            out.write(contract.output_cap_line(keep, size - keep).encode())
        os.fchmod(out.fileno(), mode & MODE_MASK)
    return keep


def extract(stream: IO[bytes], roots: dict[str, Path]) -> CopyReport:
    """Extract a tar stream whose top-level folders are the keys of `roots` into their paths.

    Raises:
        tarfile.TarError: the stream is not a tar archive.
        OSError: a destination cannot be written.
    """
    report = CopyReport()
    budget = TOTAL_LIMIT
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            top, _, rest = member.name.lstrip("./").partition("/")
            root = roots.get(top)
            if root is None or not rest:
                continue
            if not (member.isreg() or member.isdir()):
                report.refused.append(member.name)
                continue
            try:
                tarfile.data_filter(member.replace(name=rest, deep=False), str(root))
            except tarfile.FilterError:
                report.refused.append(member.name)
                continue
            target = root / rest
            if not _inside(root, target.parent):
                report.refused.append(member.name)
                continue
            if member.isdir():
                target.mkdir(mode=0o755, parents=True, exist_ok=True)
                continue
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:
                continue
            kept = _write_capped(source, target, member.size, budget, member.mode)
            budget -= kept
            if kept < member.size:
                report.capped.append(member.name)
    return report


def _inside(root: Path, directory: Path) -> bool:
    """Whether `directory`, resolved, is `root` or under it (no link leads out)."""
    real_root = root.resolve()
    real = directory.resolve()
    return real == real_root or real_root in real.parents
