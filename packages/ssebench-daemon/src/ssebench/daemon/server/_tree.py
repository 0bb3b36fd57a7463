"""Trees root walks that someone else may write: removed, handed over, copied, read.

Integrity rule (docs/integrity.md): no privileged operation follows a path through
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

Nothing agent-shaped makes a walk fail either (docs/integrity.md: nothing the
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
import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

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
    is visited once, with `fd` None; its `info` is taken when first asked.
    """

    parent_fd: int
    name: str
    depth: int
    names: list[str] = field(repr=False)
    fd: int | None = None
    leaving: bool = False
    descend: bool = True
    known: os.stat_result | None = field(default=None, repr=False)

    @property
    def info(self) -> os.stat_result:
        """The entry's lstat (through `parent_fd`; for a folder, of the folder it opened).

        Raises:
            OSError: the entry is gone.
        """
        if self.known is None:
            self.known = os.stat(self.name, dir_fd=self.parent_fd, follow_symlinks=False)
        return self.known

    @property
    def is_dir(self) -> bool:
        """Whether the entry is a folder the walk entered (or is leaving)."""
        return self.fd is not None or self.leaving

    def relative(self) -> str:
        """The entry's path below the walk's top (`` for the top itself)."""
        return "/".join([*self.names[1:], self.name]) if self.depth else ""


class _Chain:
    """Descriptors of nested folders (the last the deepest), at most `MAX_OPEN_DIRS` of
    them open: the deepest always, an ancestor let go when needed and opened again
    through `..` of its child (and checked) when the walk climbs back to it."""

    def __init__(self) -> None:
        self.fds: list[int | None] = []
        self.infos: list[os.stat_result] = []
        self.lowest = 0  # fds[:lowest] were let go; the rest are open

    def __len__(self) -> int:
        return len(self.fds)

    def push(self, fd: int, info: os.stat_result) -> None:
        """Add the child of the deepest folder (its descriptor is the chain's now)."""
        if len(self.fds) - self.lowest >= MAX_OPEN_DIRS:
            oldest = self.fds[self.lowest]
            assert oldest is not None
            os.close(oldest)
            self.fds[self.lowest] = None
            self.lowest += 1
        self.fds.append(fd)
        self.infos.append(info)

    def top(self) -> int:
        """The deepest folder's descriptor."""
        fd = self.fds[-1]
        assert fd is not None
        return fd

    def pop(self) -> None:
        """Close the deepest folder; its parent, if any, is open afterwards.

        Raises:
            TreeChangedError: the parent is not the folder it was.
        """
        fd = self.top()
        self.fds.pop()
        self.infos.pop()
        try:
            if self.fds and self.fds[-1] is None:
                parent = os.open("..", DIR_FLAGS, dir_fd=fd)
                if not _same(os.fstat(parent), self.infos[-1]):
                    os.close(parent)
                    raise TreeChangedError("..")
                self.fds[-1] = parent
                self.lowest = len(self.fds) - 1
        finally:
            os.close(fd)

    def close(self) -> None:
        """Close every descriptor still open."""
        for fd in self.fds[self.lowest :]:
            if fd is not None:
                os.close(fd)
        self.fds.clear()
        self.infos.clear()
        self.lowest = 0


def _list(fd: int) -> list[tuple[str, bool]]:
    """Each entry's name and whether it looks like a folder (from the listing itself)."""
    with os.scandir(fd) as entries:
        return [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]


def _lstat(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


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


def walk(
    parent_fd: int, name: str, *, same_device: bool = True, unlock: bool = False
) -> Iterator[Visit]:
    """Walk the entry `name` of the open folder `parent_fd`, folders before what they hold.

    Iterative and fd-relative (see the module docstring); the entries of a
    folder come in no particular order.

    Args:
        parent_fd: the folder holding the top (stays the caller's).
        name: the top: a folder (walked) or anything else (visited alone).
        same_device: leave out folders on another file system than the top (mounts).
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
        yield Visit(parent_fd, name, 0, names, known=info)
        return
    chain = _Chain()
    chain.push(fd, info)
    pending: list[list[tuple[str, bool]]] = [[]]  # per folder of the chain: still to visit
    try:
        enter = Visit(parent_fd, name, 0, names, fd=fd, known=info)
        yield enter
        pending[0] = _list(fd) if enter.descend else []
        while chain:
            depth, here = len(chain), chain.top()
            if pending[-1]:
                child, looks_like_dir = pending[-1].pop()
                if not looks_like_dir:
                    # Acted on through `here` without following: no need to lstat first.
                    yield Visit(here, child, depth, names)
                    continue
                settled = _settle(here, child, unlock=unlock)
                if settled is None:
                    continue
                child_info, child_fd = settled
                if child_fd is None:
                    yield Visit(here, child, depth, names, known=child_info)
                    continue
                if same_device and child_info.st_dev != info.st_dev:
                    os.close(child_fd)
                    continue
                chain.push(child_fd, child_info)
                enter = Visit(here, child, depth, names, fd=child_fd, known=child_info)
                yield enter
                pending.append(_list(child_fd) if enter.descend else [])
                names.append(child)
                continue
            left, left_info = names.pop(), chain.infos[-1]
            pending.pop()
            chain.pop()
            holder = chain.top() if chain else parent_fd
            yield Visit(holder, left, depth - 1, names, leaving=True, known=left_info)
    finally:
        chain.close()


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


def _copy_file(
    src_dir: int,
    name: str,
    dst_dir: int,
    dst_name: str,
    *,
    owner: tuple[int, int] | None,
    mode: int | None = None,
    times: bool = True,
    uid: int | None = None,
) -> None:
    """Copy the regular file `name` (opened without following) to the new file `dst_name`:
    contents, then owner (`owner`, or the source's as root), mode (`mode`, or the
    source's) and times.

    Raises:
        OSError: the source is not a regular file (of `uid`, when given), or the copy failed.
    """
    src = os.open(name, FILE_FLAGS, dir_fd=src_dir)
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode) or uid not in (None, info.st_uid):
            raise OSError(errno.EINVAL, f"{name!r} is not a regular file of its owner")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        dst = os.open(dst_name, flags, 0o600, dir_fd=dst_dir)
        try:
            send_file(src, dst, info.st_size)
            _set_attributes(dst, info, owner=owner, mode=mode, times=times)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def copy_file_at(
    src_dir: int, name: str, dst_dir: int, dst_name: str, *, mode: int, uid: int
) -> None:
    """Copy the regular file `name` of `uid` (opened without following) to the new file
    `dst_name` of mode `mode`, owned by the caller.

    Raises:
        OSError: the source is not a regular file of `uid`, or the copy failed.
    """
    _copy_file(src_dir, name, dst_dir, dst_name, owner=None, mode=mode, times=False, uid=uid)


def _set_attributes(
    fd: int,
    info: os.stat_result,
    *,
    owner: tuple[int, int] | None,
    mode: int | None = None,
    times: bool = True,
) -> None:
    """Owner first (a change of owner clears set-id bits), then mode and times."""
    if os.geteuid() == 0:
        uid, gid = owner or (info.st_uid, info.st_gid)
        os.fchown(fd, uid, gid)
    os.fchmod(fd, stat.S_IMODE(info.st_mode) if mode is None else mode)
    if times:
        os.utime(fd, ns=(info.st_atime_ns, info.st_mtime_ns))


def _copy(src: Path, dst: Path, owner: tuple[int, int] | None, skip: Collection[str] = ()) -> None:
    """`copy_tree` in the calling thread: iterative and fd-relative on both sides."""
    src_parent = open_parent(src)
    try:
        dst_parent = open_parent(dst)
    except BaseException:
        os.close(src_parent)
        raise
    made = _Chain()
    skipped: list[int] = []  # depths of the folders left out, being entered and left
    try:
        for visit in walk(src_parent, src.name, same_device=False):
            into = made.top() if visit.depth else dst_parent
            name = visit.name if visit.depth else dst.name
            if visit.depth and visit.name in skip:
                if visit.fd is not None:
                    visit.descend = False
                    skipped.append(visit.depth)
                elif visit.leaving and skipped and skipped[-1] == visit.depth:
                    skipped.pop()
                continue
            if visit.leaving:
                _set_attributes(made.top(), visit.info, owner=owner)
                made.pop()
            elif visit.fd is not None:
                os.mkdir(name, 0o700, dir_fd=into)
                fd = os.open(name, DIR_FLAGS, dir_fd=into)
                made.push(fd, os.fstat(fd))
            elif stat.S_ISLNK(visit.info.st_mode):
                target = os.readlink(visit.name, dir_fd=visit.parent_fd)
                os.symlink(target, name, dir_fd=into)
                if os.geteuid() == 0:
                    uid, gid = owner or (visit.info.st_uid, visit.info.st_gid)
                    os.chown(name, uid, gid, dir_fd=into, follow_symlinks=False)
            elif stat.S_ISREG(visit.info.st_mode):
                _copy_file(visit.parent_fd, visit.name, into, name, owner=owner)
            # Sockets, FIFOs and devices are left out, as the tool layer left them out of
            # /ssebench-repo; hard links become copies.
    finally:
        made.close()
        os.close(dst_parent)
        os.close(src_parent)


async def copy_tree(
    src: Path,
    dst: Path,
    *,
    owner: tuple[int, int] | None,
    skip: Collection[str] = (),
) -> None:
    """Copy `src` to the new path `dst`: folders, regular files and symlinks, with their
    modes and times, owned by `owner` (or, as root, by their owners in `src`).

    Iterative and fd-relative on both sides (module docstring), so any depth
    works and costs what the number of entries costs; nothing is ever
    written through a link. Sockets, FIFOs and devices are left out and hard
    links become copies (as in /ssebench-repo, which the tool layer made so).

    Args:
        src: the tree to copy (read as root).
        dst: where the copy goes; must not exist; its parent must be root's.
        owner: (uid, gid) that owns every entry of the copy, or None to keep owners.
        skip: names left out of the copy at any depth (e.g. `.git`: a scratch copy never
            carries history).

    Raises:
        OSError: the copy failed; the message says why.
    """
    await asyncio.to_thread(_copy, src, dst, owner, skip)


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
