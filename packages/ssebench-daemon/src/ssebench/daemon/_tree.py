"""Trees root walks that someone else may write: removed, handed over, copied, read.

Integrity rule (DESIGN.md §4): no privileged operation follows a path through
a tree the agent or `sse-runner` can write — fd-relative, or not at all. Every
walk here starts from a descriptor of the tree's parent folder (which the
caller names by path: it must be a folder only root can change, or a sticky
one such as /tmp) and opens each folder relative to its parent's descriptor
with O_NOFOLLOW|O_DIRECTORY, then checks with fstat that it holds the folder
it listed. Entries are changed only through those descriptors: unlinkat,
rmdir at a descriptor, fchownat without following, fchmod on a descriptor
opened here. A symlink planted anywhere (also swapped in while a walk runs)
is removed or handed over as the link itself, never followed; a folder
swapped in meanwhile makes the walk fail instead of acting on it.

Nothing agent-shaped makes a walk fail either (DESIGN.md §4: nothing the
agent does turns `failed` into `error`): walks are iterative, with at most
`MAX_OPEN_DIRS` descriptors open (a folder whose descriptor was let go is
opened again through `..` of its child and checked), so any depth works.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import resource
import shutil
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ssebench.daemon._procs import DEFAULT_PATH, clean_path

DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""How every folder of a walk is opened: never through a symlink."""

FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""How a file of a walk is opened for reading: never through a symlink, never blocking
on a FIFO, never becoming a controlling terminal."""

MAX_OPEN_DIRS: Final = 64
"""Folder descriptors a walk keeps open at most, whatever the depth."""

_RETRIES: Final = 5


class TreeChangedError(OSError):
    """An entry changed kind or identity while a walk was at it (someone is racing it)."""

    def __init__(self, name: str) -> None:
        super().__init__(errno.ESTALE, f"{name!r} changed while it was being walked")


@dataclass
class Visit:
    """One entry of a walk, valid while the walk is at it.

    `parent_fd` is the open folder holding `name`. A folder is visited twice:
    on entering (`fd` open on it; set `descend = False` to skip what is
    inside) and on leaving (`leaving`, its descriptor closed). Everything else
    is visited once, with `fd` None.
    """

    parent_fd: int
    name: str
    info: os.stat_result
    depth: int
    names: list[str] = field(repr=False)
    fd: int | None = None
    leaving: bool = False
    descend: bool = True

    @property
    def is_dir(self) -> bool:
        """Whether the entry is a folder."""
        return stat.S_ISDIR(self.info.st_mode)

    def relative(self) -> str:
        """The entry's path below the walk's top (`` for the top itself)."""
        return "/".join([*self.names[1:], self.name]) if self.depth else ""


@dataclass
class _Frame:
    name: str
    info: os.stat_result
    fd: int | None
    pending: list[str]


def _lstat(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _list(fd: int) -> list[str]:
    return os.listdir(fd)


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _unlock_own_dir(parent_fd: int, name: str, info: os.stat_result) -> bool:
    """Give a folder of our own that we may not read u+rwx, through a descriptor (O_PATH)
    of exactly that folder. Root never needs it (it reads every folder)."""
    try:
        fd = os.open(name, os.O_PATH | DIR_FLAGS, dir_fd=parent_fd)
    except OSError:
        return False
    try:
        now = os.fstat(fd)
        if not _same(now, info) or now.st_uid != os.geteuid():
            return False
        # fchmod refuses O_PATH descriptors; the /proc link names exactly this folder.
        Path(f"/proc/self/fd/{fd}").chmod(stat.S_IMODE(now.st_mode) | 0o700)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _open_dir(parent_fd: int, name: str, info: os.stat_result, *, unlock: bool) -> int:
    """Open the folder `name` that lstat described as `info`.

    Raises:
        TreeChangedError: it is no longer that folder (a link, a file, another folder).
        FileNotFoundError: it is gone.
        OSError: it cannot be opened.
    """
    for attempt in range(2):
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
        except NotADirectoryError as exc:
            raise TreeChangedError(name) from exc
        except PermissionError:
            if attempt or not unlock or not _unlock_own_dir(parent_fd, name, info):
                raise
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise TreeChangedError(name) from exc
            raise
        now = os.fstat(fd)
        if not _same(now, info) or not stat.S_ISDIR(now.st_mode):
            os.close(fd)
            raise TreeChangedError(name)
        if unlock and now.st_uid == os.geteuid() and now.st_mode & 0o700 != 0o700:
            os.fchmod(fd, stat.S_IMODE(now.st_mode) | 0o700)
        return fd
    raise AssertionError("unreachable")


def _settle(parent_fd: int, name: str, *, unlock: bool) -> tuple[os.stat_result, int | None] | None:
    """lstat `name` and open it when it is a folder; None when it is gone."""
    for _ in range(_RETRIES):
        info = _lstat(parent_fd, name)
        if info is None:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return info, None
        try:
            return info, _open_dir(parent_fd, name, info, unlock=unlock)
        except FileNotFoundError:
            return None
        except TreeChangedError:
            continue
    raise TreeChangedError(name)


def _reopen_parent(child_fd: int, parent: _Frame) -> int:
    fd = os.open("..", DIR_FLAGS, dir_fd=child_fd)
    if not _same(os.fstat(fd), parent.info):
        os.close(fd)
        raise TreeChangedError(parent.name)
    return fd


def walk(
    parent_fd: int, name: str, *, same_device: bool = True, unlock: bool = False
) -> Iterator[Visit]:
    """Walk the entry `name` of the open folder `parent_fd`, folders before what they hold.

    Iterative and fd-relative (see the module docstring); the entries of a
    folder come in no particular order.

    Args:
        parent_fd: the folder holding the top (stays the caller's).
        name: the top: a folder (walked) or anything else (visited alone).
        same_device: leave out entries on another file system than the top.
        unlock: make folders of the caller's own user u+rwx (through their
            descriptors) when it could not otherwise empty them.

    Raises:
        TreeChangedError: an entry changed while the walk was at it.
        OSError: a folder cannot be opened or listed.
    """
    settled = _settle(parent_fd, name, unlock=unlock)
    if settled is None:
        return
    info, fd = settled
    names = [name]
    if fd is None:
        yield Visit(parent_fd, name, info, 0, names)
        return
    frames = [_Frame(name, info, fd, [])]
    try:
        enter = Visit(parent_fd, name, info, 0, names, fd=fd)
        yield enter
        frames[0].pending = _list(fd) if enter.descend else []
        lowest = 0  # frames[:lowest] let their descriptors go; the rest hold theirs
        while frames:
            frame = frames[-1]
            assert frame.fd is not None
            if frame.pending:
                child = frame.pending.pop()
                settled = _settle(frame.fd, child, unlock=unlock)
                if settled is None:
                    continue
                child_info, child_fd = settled
                if same_device and child_info.st_dev != info.st_dev:
                    if child_fd is not None:
                        os.close(child_fd)
                    continue
                if child_fd is None:
                    yield Visit(frame.fd, child, child_info, len(frames), names)
                    continue
                try:
                    enter = Visit(frame.fd, child, child_info, len(frames), names, fd=child_fd)
                    yield enter
                    pending = _list(child_fd) if enter.descend else []
                except BaseException:
                    os.close(child_fd)
                    raise
                if len(frames) - lowest >= MAX_OPEN_DIRS:
                    oldest = frames[lowest]
                    assert oldest.fd is not None
                    os.close(oldest.fd)
                    oldest.fd = None
                    lowest += 1
                frames.append(_Frame(child, child_info, child_fd, pending))
                names.append(child)
                continue
            frames.pop()
            names.pop()
            if frames and frames[-1].fd is None:
                frames[-1].fd = _reopen_parent(frame.fd, frames[-1])
                lowest = len(frames) - 1
            os.close(frame.fd)
            frame.fd = None
            holder = frames[-1].fd if frames else parent_fd
            assert holder is not None
            yield Visit(holder, frame.name, frame.info, len(frames), names, leaving=True)
    finally:
        for frame in frames:
            if frame.fd is not None:
                os.close(frame.fd)


def open_parent(path: Path) -> int:
    """A descriptor of `path`'s parent folder, opened by path (it must be root's or sticky).

    Raises:
        OSError: it cannot be opened.
    """
    return os.open(path.parent, DIR_FLAGS & ~os.O_NOFOLLOW)


# -- removing ------------------------------------------------------------------------------


def _remove_once(parent_fd: int, name: str) -> OSError | None:
    error: OSError | None = None
    try:
        for visit in walk(parent_fd, name, unlock=True):
            if visit.fd is not None:
                continue  # entering a folder: it goes when it is left
            try:
                if visit.leaving:
                    os.rmdir(visit.name, dir_fd=visit.parent_fd)
                else:
                    os.unlink(visit.name, dir_fd=visit.parent_fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                error = error or exc
    except OSError as exc:
        error = error or exc
    return error


def remove_tree_sync(path: Path) -> None:
    """`remove_tree` in the calling thread."""
    try:
        parent = open_parent(path)
    except FileNotFoundError:
        return
    try:
        error: OSError | None = None
        for _ in range(_RETRIES):
            error = _remove_once(parent, path.name)
            if _lstat(parent, path.name) is None:
                return
        raise OSError(error.errno if error else errno.ENOTEMPTY, f"cannot remove {path}: {error}")
    finally:
        os.close(parent)


async def remove_tree(path: Path) -> None:
    """Remove `path` and everything under it; a missing one is fine.

    fd-relative and iterative (module docstring): a link is removed, never
    followed; folders on another file system are left alone (and so is the
    folder holding them); any depth works. A folder of the daemon's own user
    that it may not empty is made u+rwx through its descriptor first.

    Raises:
        OSError: something could not be removed (tried a few times).
    """
    await asyncio.to_thread(remove_tree_sync, path)


# -- handing over --------------------------------------------------------------------------


def chown_tree(path: Path, uid: int, gid: int) -> None:
    """Give `path` and every entry under it to uid:gid: links themselves, never their targets.

    Raises:
        OSError: an entry could not be handed over, or one changed meanwhile.
    """
    parent = open_parent(path)
    try:
        for visit in walk(parent, path.name):
            if visit.leaving:
                continue
            if visit.fd is not None:
                os.fchown(visit.fd, uid, gid)
            else:
                os.chown(visit.name, uid, gid, dir_fd=visit.parent_fd, follow_symlinks=False)
    finally:
        os.close(parent)


# -- copying -------------------------------------------------------------------------------


def copy_file_at(
    src_dir: int,
    name: str,
    dst_dir: int,
    dst_name: str,
    size: int,
    *,
    mode: int = 0o600,
    uid: int | None = None,
) -> None:
    """Copy `size` bytes of the regular file `name` (not through a link) to a new file
    `dst_name` of mode `mode`.

    Raises:
        OSError: the source is not a regular file (owned by `uid`, when given) of at
            least that size, or the copy failed.
    """
    src = os.open(name, FILE_FLAGS, dir_fd=src_dir)
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode) or uid not in (None, info.st_uid):
            raise OSError(errno.EINVAL, f"{name!r} is not a regular file of its owner")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        dst = os.open(dst_name, flags, 0o600, dir_fd=dst_dir)
        try:
            os.fchmod(dst, mode)
            send_file(src, dst, size)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def send_file(src: int, dst: int, size: int) -> None:
    """Write exactly `size` bytes of the open file `src` to `dst` (a file or a pipe).

    Raises:
        OSError: `src` ended early, or writing failed.
    """
    left = size
    while left > 0:
        sent = os.sendfile(dst, src, None, min(left, 1 << 30))
        if sent == 0:
            raise OSError(errno.EIO, f"the file ended {left} bytes early (it changed)")
        left -= sent


def _copy_in_python(src: Path, dst: Path) -> None:
    """`cp -a` for images without cp: folders, files, links, modes, times and (as root)
    owners; other kinds of files are left out. One descriptor per level of the copy."""
    src_parent, dst_parent = open_parent(src), open_parent(dst)
    opened: list[int] = []
    try:
        for visit in walk(src_parent, src.name, same_device=False):
            into = opened[-1] if visit.depth else dst_parent
            name = visit.name if visit.depth else dst.name
            info = visit.info
            if visit.leaving:
                fd = opened.pop()
                _finish_entry(fd, info)
                os.close(fd)
            elif visit.fd is not None:
                os.mkdir(name, 0o700, dir_fd=into)
                opened.append(os.open(name, DIR_FLAGS, dir_fd=into))
            elif stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(visit.name, dir_fd=visit.parent_fd), name, dir_fd=into)
                if os.geteuid() == 0:
                    os.chown(name, info.st_uid, info.st_gid, dir_fd=into, follow_symlinks=False)
            elif stat.S_ISREG(info.st_mode):
                copy_file_at(visit.parent_fd, visit.name, into, name, info.st_size)
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=into)
                try:
                    _finish_entry(fd, info)
                finally:
                    os.close(fd)
    finally:
        for fd in (*opened, src_parent, dst_parent):
            os.close(fd)


def _finish_entry(fd: int, info: os.stat_result) -> None:
    if os.geteuid() == 0:
        os.fchown(fd, info.st_uid, info.st_gid)
    os.fchmod(fd, stat.S_IMODE(info.st_mode))
    os.utime(fd, ns=(info.st_atime_ns, info.st_mtime_ns))


def _cp(environ: Mapping[str, str]) -> str | None:
    return shutil.which("cp", path=clean_path(environ.get("PATH"))) or shutil.which(
        "cp", path=DEFAULT_PATH
    )


async def copy_tree(
    src: Path, dst: Path, *, owner: tuple[int, int] | None, environ: Mapping[str, str]
) -> None:
    """Copy `src` to the new path `dst` preserving modes, times, links and symlinks.

    `src` must be a tree only root can write (e.g. /ssebench-repo), and `dst`
    a new path in a folder only root can write; handing the copy over to
    `owner` is fd-relative (`chown_tree`). Any depth works.

    Args:
        src: the tree to copy (read as root).
        dst: where the copy goes; must not exist.
        owner: (uid, gid) that owns every entry of the copy, or None to keep owners.
        environ: the image's environment (where to find `cp`).

    Raises:
        OSError: the copy failed; the message says why.
    """
    cp = _cp(environ)
    if cp is None:
        await asyncio.to_thread(_copy_in_python, src, dst)
    else:
        proc = await asyncio.create_subprocess_exec(
            cp,
            "-a",
            "--",
            str(src),
            str(dst),
            env={"PATH": DEFAULT_PATH, "LC_ALL": "C"},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            raise OSError(f"cp -a {src} {dst} failed: {err.decode(errors='replace').strip()}")
    if owner is not None:
        await asyncio.to_thread(chown_tree, dst, *owner)


def raise_open_file_limit() -> None:
    """Lift this process's soft limit on open files to its hard limit (children inherit it).

    git keeps one descriptor per level of the folders it reads; with the
    common soft limit of 1024 a tree deeper than that would be read only in
    part, without an error.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
