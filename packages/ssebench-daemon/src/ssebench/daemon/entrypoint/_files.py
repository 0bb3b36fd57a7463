"""The results and archive directories: preparing them, logs, handing files over, the marker.

The archive directory is the agent's: anything in it may be a link the agent
planted (to /etc/passwd, to result.json, to a directory). Nothing here
follows one: directories are opened with O_NOFOLLOW and walked by file
descriptor, entries are changed through their own descriptors, and files
are created with O_EXCL|O_NOFOLLOW. At the hand-over, links, special files
and hard-linked files are removed and special bits cleared (`hand_over`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

LOG_TAIL_BYTES: Final = 4096
"""How much of a service's log a start-up failure quotes."""

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
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


REPORTED: Final = 100
"""How many removed or untouchable entries `HandOver` names (the rest are only counted)."""

HANDED_OVER_MODE_MASK: Final = 0o755
"""The permission bits an entry keeps: no setuid/setgid/sticky, no group or other write."""

_SHOWN_CHARS: Final = 160


def shown(text: str) -> str:
    """A path or link target as a log line may show it: escaped, its end if it is long."""
    escaped = text.encode("unicode_escape").decode("ascii")
    return escaped if len(escaped) <= _SHOWN_CHARS else f"[...]{escaped[-_SHOWN_CHARS:]}"


@dataclass
class HandOver:
    """What `hand_over` did."""

    changed: int = 0
    """Entries re-owned or stripped of bits."""

    removed: list[str] = field(default_factory=list)
    """The first `REPORTED` entries removed, each with why (names escaped by `shown`)."""

    removed_count: int = 0
    skipped: list[str] = field(default_factory=list)
    """The first `REPORTED` entries that could be neither tamed nor removed."""

    skipped_count: int = 0

    def remove_note(self, note: str) -> None:
        """Count a removed entry; name it if few have been named."""
        self.removed_count += 1
        if len(self.removed) < REPORTED:
            self.removed.append(note)

    def skip_note(self, note: str) -> None:
        """Count an entry left as it was; name it if few have been named."""
        self.skipped_count += 1
        if len(self.skipped) < REPORTED:
            self.skipped.append(note)


@dataclass
class _Folder:
    """A folder the walk is in: its names still to visit, its identity, its name."""

    names: list[str]
    ident: tuple[int, int]
    name: str


def _ident(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file"


def _tame(fd: int, info: os.stat_result, uid: int, gid: int) -> bool:
    """Give the open entry to uid:gid without special or group/other-write bits.

    Returns:
        Whether anything changed.
    """
    changed = False
    if (info.st_uid, info.st_gid) != (uid, gid):
        os.fchown(fd, uid, gid)  # clears setuid/setgid on files; the chmod below is the rule
        changed = True
    wanted = stat.S_IMODE(info.st_mode) & HANDED_OVER_MODE_MASK
    if stat.S_IMODE(os.fstat(fd).st_mode) != wanted:
        os.fchmod(fd, wanted)
        changed = True
    return changed


class _Walk:
    """One hand-over: a depth-first walk that holds a single folder descriptor at a time.

    It enters a folder by name relative to its parent's descriptor (O_NOFOLLOW)
    and climbs back through `..`, checked to be the folder it came from; so a
    tree of any depth is handled with one open descriptor and no recursion.
    """

    def __init__(self, uid: int, gid: int, done: HandOver) -> None:
        self.uid = uid
        self.gid = gid
        self.done = done
        self.stack: list[_Folder] = []

    def relative(self, name: str) -> str:
        return "/".join([*(folder.name for folder in self.stack[1:]), name])

    def run(self, root: int) -> None:
        fd = os.dup(root)
        try:
            self.stack.append(_Folder(self._names(fd, ""), _ident(os.fstat(fd)), ""))
            while self.stack:
                folder = self.stack[-1]
                if not folder.names:
                    self.stack.pop()
                    if self.stack:
                        fd = self._climb(fd, self.stack[-1].ident)
                    continue
                name = folder.names.pop()
                child = self._visit(fd, name)
                if child is not None:
                    os.close(fd)
                    fd = child
                    names = self._names(fd, name)
                    self.stack.append(_Folder(names, _ident(os.fstat(fd)), name))
        finally:
            os.close(fd)

    def _names(self, fd: int, name: str) -> list[str]:
        try:
            return os.listdir(fd)
        except OSError as exc:
            self.done.skip_note(f"{shown(self.relative(name))}/ ({exc.strerror or exc})")
            return []

    @staticmethod
    def _climb(fd: int, expected: tuple[int, int]) -> int:
        parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
        if _ident(os.fstat(parent)) != expected:
            os.close(parent)
            raise UnsafePathError("a folder was moved while the files were handed over")
        os.close(fd)
        return parent

    def _visit(self, dir_fd: int, name: str) -> int | None:
        """Tame or remove one entry; a folder's open descriptor when the walk enters it."""
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        mode = info.st_mode
        why = None
        if stat.S_ISLNK(mode):
            try:
                why = f"a link to {shown(os.readlink(name, dir_fd=dir_fd))}"
            except OSError:
                why = "a link"
        elif stat.S_ISREG(mode) and info.st_nlink > 1:
            why = f"a hard link ({info.st_nlink} names)"
        elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            why = _kind(mode)
        try:
            if why is not None:
                os.unlink(name, dir_fd=dir_fd)
                self.done.remove_note(f"{shown(self.relative(name))} ({why})")
                return None
            flags = _DIR_FLAGS if stat.S_ISDIR(mode) else _FILE_FLAGS
            fd = os.open(name, flags, dir_fd=dir_fd)
        except OSError as exc:
            self.done.skip_note(f"{shown(self.relative(name))} ({exc.strerror or exc})")
            return None
        try:
            opened = os.fstat(fd)
            if _ident(opened) != _ident(info):  # replaced meanwhile: look at it no further
                raise FileNotFoundError(errno.ENOENT, "replaced during the hand-over")
            if _tame(fd, opened, self.uid, self.gid):
                self.done.changed += 1
        except OSError as exc:
            os.close(fd)
            self.done.skip_note(f"{shown(self.relative(name))} ({exc.strerror or exc})")
            return None
        if stat.S_ISDIR(mode):
            return fd
        os.close(fd)
        return None


def hand_over(directory: Path, uid: int, gid: int, *, include_self: bool = False) -> HandOver:
    """Give every entry below `directory` to uid:gid, tamed, never following a link.

    Integrity rule (docs/integrity.md, "What reaches the host is tamed": no links
    out of the run directory, no setuid/setgid or world-write bits). Below
    `directory`, whatever the agent planted:

    - symbolic links are removed (a link to /etc, /root or result.json must not
      reach the host's run directory), and so are FIFOs, sockets and devices;
    - regular files with more than one hard link are removed: their other name
      may be a file that is not the agent's, which must be neither re-owned
      nor left on the host with its owner and bits;
    - every other file and folder goes to uid:gid and loses its setuid,
      setgid and sticky bits and group and other write (the host owner's
      group may be shared with other users).

    Every step starts from a descriptor: entries are found relative to their
    folder's descriptor without following links, opened with O_NOFOLLOW,
    checked to be what was looked at, and changed through their own
    descriptor (fchown, fchmod). Nothing is left out for its depth.

    Args:
        directory: the results directory (the host's run directory) or the archive.
        uid: the new owner.
        gid: the new group.
        include_self: hand `directory` itself over too.

    Returns:
        What changed, what was removed and what could not be touched.

    Raises:
        UnsafePathError: `directory` is itself a link, or a folder moved during the walk.
        OSError: it cannot be opened.
    """
    done = HandOver()
    root = os.open(directory, _DIR_FLAGS)
    try:
        if include_self and _tame(root, os.fstat(root), uid, gid):
            done.changed += 1
        _Walk(uid, gid, done).run(root)
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
