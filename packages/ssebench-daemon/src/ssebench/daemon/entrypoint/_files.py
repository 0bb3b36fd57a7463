"""The results and archive directories: preparing them, logs, handing files over, the marker.

The archive directory is the agent's: anything in it may be a link the agent
planted (to /etc/passwd, to result.json, to a directory). Nothing here
follows one: directories are opened with O_NOFOLLOW and walked by file
descriptor, ownership changes use `follow_symlinks=False`, and files are
created with O_EXCL|O_NOFOLLOW. A regular file with more than one link is
never re-owned (it may be a hard link to someone else's file).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

LOG_TAIL_BYTES: Final = 4096
"""How much of a service's log a start-up failure quotes."""

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePathError(OSError):
    """A directory the entrypoint must use is a link or not a directory."""


def _real_dir(path: Path, what: str) -> os.stat_result:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePathError(f"the {what} {path} is not a directory (a link?)")
    return info


def prepare_results(results_dir: Path) -> os.stat_result:
    """Make sure the results directory exists and is a real directory.

    Returns:
        Its status: its owner is the owner of the host's run directory.

    Raises:
        UnsafePathError: it is a link or a file.
        OSError: it cannot be created.
    """
    with contextlib.suppress(FileExistsError):
        results_dir.mkdir(mode=0o700, parents=True)
    return _real_dir(results_dir, "results directory")


def prepare_archive(archive_dir: Path, uid: int, gid: int) -> None:
    """Make the archive directory the agent's (created when missing).

    Raises:
        UnsafePathError: it is a link or a file.
        OSError: it cannot be created or handed over.
    """
    with contextlib.suppress(FileExistsError):
        archive_dir.mkdir(mode=0o755, parents=True)
    _real_dir(archive_dir, "archive directory")
    fd = os.open(archive_dir, _DIR_FLAGS)
    try:
        if os.geteuid() == 0:
            os.fchown(fd, uid, gid)
        os.fchmod(fd, 0o755)
    finally:
        os.close(fd)


def open_log(results_dir: Path, name: str) -> int:
    """Create (or empty) a log file in the results directory, never through a link.

    Returns:
        A file descriptor open for appending.

    Raises:
        OSError: it cannot be created.
    """
    path = results_dir / name
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(os.lstat(path).st_mode):
            path.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(path, flags, 0o600)


def log_tail(results_dir: Path, name: str, limit: int = LOG_TAIL_BYTES) -> str:
    """The last `limit` bytes of a log in the results directory ('' when there is none)."""
    try:
        fd = os.open(results_dir / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as log:
        size = os.fstat(log.fileno()).st_size
        log.seek(max(0, size - limit))
        data = log.read(limit)
    text = data.decode("utf-8", errors="replace")
    return text if size <= limit else f"[...]{text}"


@dataclass
class HandOver:
    """What `hand_over` did."""

    changed: int = 0
    skipped: list[str] = field(default_factory=list)


MAX_DEPTH: Final = 64
"""Folders nested deeper than this (only an agent makes such trees) are left alone."""


def _walk(
    dir_fd: int, prefix: str, depth: int = 0
) -> Iterator[tuple[int, str, os.stat_result | None]]:
    """Every entry below an open directory: (its directory's fd, its name, its lstat).

    A folder below `MAX_DEPTH` comes with None instead of its status and is not entered.
    """
    with os.scandir(dir_fd) as entries:
        names = [entry.name for entry in entries]
    for name in names:
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(info.st_mode) and depth >= MAX_DEPTH:
            yield dir_fd, f"{prefix}{name}", None
            continue
        yield dir_fd, f"{prefix}{name}", info
        if stat.S_ISDIR(info.st_mode):
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                yield from _walk(child, f"{prefix}{name}/", depth + 1)
            finally:
                os.close(child)


def hand_over(directory: Path, uid: int, gid: int, *, include_self: bool = False) -> HandOver:
    """Give every entry below `directory` to uid:gid, never following a link.

    Links themselves are re-owned (lchown); what they point to never is.
    Regular files with several hard links, and whatever is nested deeper
    than `MAX_DEPTH` folders, are left alone.

    Args:
        directory: the results directory (the host's run directory).
        uid: the new owner.
        gid: the new group.
        include_self: re-own `directory` itself too.

    Returns:
        How many entries changed and which were left alone.

    Raises:
        UnsafePathError: `directory` is itself a link.
        OSError: it cannot be opened.
    """
    done = HandOver()
    root = os.open(directory, _DIR_FLAGS)
    try:
        if include_self and (os.fstat(root).st_uid, os.fstat(root).st_gid) != (uid, gid):
            os.fchown(root, uid, gid)
            done.changed += 1
        for dir_fd, relative, info in _walk(root, ""):
            name = relative.rsplit("/", 1)[-1]
            if info is None or (stat.S_ISREG(info.st_mode) and info.st_nlink > 1):
                done.skipped.append(relative)
                continue
            if (info.st_uid, info.st_gid) == (uid, gid):
                continue
            try:
                os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                done.skipped.append(relative)
                continue
            done.changed += 1
    finally:
        os.close(root)
    return done


def write_marker(results_dir: Path, name: str, text: str, uid: int, gid: int) -> None:
    """Write the marker file (replacing any), owned by uid:gid, never through a link.

    Raises:
        OSError: it cannot be written.
    """
    root = os.open(results_dir, _DIR_FLAGS)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=root)
        fd = os.open(name, _NEW_FILE_FLAGS, 0o644, dir_fd=root)
        try:
            os.write(fd, text.encode())
            if os.geteuid() == 0:
                os.fchown(fd, uid, gid)
        finally:
            os.close(fd)
    finally:
        os.close(root)
