"""Clearing shared writable places of what `sse-runner` and `model` left there.

Rules enforced (docs/integrity.md):

- What a check left in shared writable places is gone before `model` runs
  again. After every check `Sweeper.after_check` removes, below /tmp,
  /var/tmp, /dev/shm, /run/lock, /dev/mqueue and the agent's own trees (its
  source tree, home and archive, which it may have opened to everyone): every
  entry sse-runner owns, and every entry sse-runner could have written that
  changed while the check ran (a file it may write, or any entry of a
  directory where it may rename, the sticky ones excepted); and every SysV IPC
  object (shared memory, semaphores, message queues) it owns, created, or
  could write and that was used while the check ran. A change is known by
  the entry's ctime, which no unprivileged user can set back.
- Model's files in shared places do not outlive the agent phase:
  `Sweeper.after_agent` removes every entry `model` or sse-runner owns there
  (the archive, the source tree and model's home excepted) and their IPC
  objects.
- No privileged operation follows a path through a tree the agent or
  sse-runner can write: every directory is opened with
  O_DIRECTORY|O_NOFOLLOW relative to its parent's descriptor, entries go with
  unlinkat/rmdir relative to it, and a walk climbs back through ".." only
  after checking that it reached the directory it came from. A directory to be
  removed is first made root's and 0700, so nobody else reaches what is below
  it while it goes, even when removing fails. Nothing recurses and at most
  two directories are open at a time, so no depth of tree exhausts the stack
  or the descriptors.

A process of the agent that runs *during* an agent-phase check can receive
what the check is shown as it happens (it could as well print it in the
check's output, which the agent reads): that is inherent to the difficulties
that stage hidden material for the agent's checks (0 and 1). The sweeps make
sure nothing of it persists once the check is over.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from ssebench.daemon._users import Identity
from ssebench.daemon.server._ipc import SYSVIPC_DIR, ipc_leftovers, ipc_objects, remove_ipc

log = logging.getLogger("ssebench.daemon")

SHARED_DIRS: Final = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
"""Directories everyone may write: swept after every check and at the end of the agent phase."""

CLOCK_TICK_NS: Final = 20_000_000
"""How far the kernel's coarse clock, which stamps file times, may lag the real one."""

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_ACL_XATTRS: Final = ("system.posix_acl_access", "system.posix_acl_default")


class MovedError(OSError):
    """A directory moved while it was walked: the walk stopped there."""


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _names(fd: int) -> list[str]:
    with os.scandir(fd) as entries:
        return [entry.name for entry in entries]


def _descend(fd: int, name: str, info: os.stat_result) -> int:
    """Open the directory `name` in `fd`, which must still be the one `info` describes."""
    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
    if not _same(os.fstat(child), info):
        os.close(child)
        raise MovedError(f"{name} changed while it was swept")
    return child


def _climb(fd: int, parent: os.stat_result) -> int:
    """Open the parent of `fd`, which must be the directory the walk came from."""
    up = os.open("..", _DIR_FLAGS, dir_fd=fd)
    if not _same(os.fstat(up), parent):
        os.close(up)
        raise MovedError("a directory moved while it was swept")
    return up


def _lock(fd: int) -> None:
    """Make a directory about to go root's and 0700: nobody else reaches what is below it."""
    if os.geteuid() == 0:
        os.fchown(fd, 0, 0)
    os.fchmod(fd, 0o700)


def remove_entry(dir_fd: int, name: str) -> None:
    """Remove `name` of the open directory `dir_fd` and all below it, never following a link.

    A directory is locked (root's, 0700) before it is emptied. Mount points are
    never entered.

    Raises:
        OSError: something could not be removed (a directory is then left locked).
    """
    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = _descend(dir_fd, name, info)
    try:
        _lock(fd)
        # Each frame: a directory being emptied, what is left of its entries, its name.
        frames: list[tuple[os.stat_result, list[str], str]] = [(info, _names(fd), name)]
        while True:
            here, left, _ = frames[-1]
            if left:
                entry = left.pop()
                try:
                    sub = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if not stat.S_ISDIR(sub.st_mode):
                    os.unlink(entry, dir_fd=fd)
                    continue
                if sub.st_dev != here.st_dev:
                    raise OSError(f"{entry} is a mount point")
                child = _descend(fd, entry, sub)
                os.close(fd)
                fd = child
                os.fchmod(fd, 0o700)
                frames.append((sub, _names(fd), entry))
                continue
            _, _, done = frames.pop()
            if not frames:
                break
            up = _climb(fd, frames[-1][0])
            os.close(fd)
            fd = up
            os.rmdir(done, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


@dataclass(frozen=True)
class Leftovers:
    """Which entries a sweep removes.

    `owners`: every entry these uids own goes, with everything below it.
    `writer` (uid, gid): a user whose changes go too — entries it could have
    written (a file it may write, an entry of a directory where it may rename
    and that is not sticky) whose ctime is `since_ns` or later.
    `keep`: (st_dev, st_ino) of directories a sweep neither enters nor removes.
    `names`: entries with one of these names go, whoever owns them.
    `everywhere`: enter every directory; otherwise only those `writer` may search.
    """

    owners: frozenset[int]
    names: frozenset[str] = frozenset()
    writer: tuple[int, int] | None = None
    since_ns: int = 0
    keep: frozenset[tuple[int, int]] = frozenset()
    everywhere: bool = True


def _has_acl(target: int | str) -> bool:
    """Whether a file carries a POSIX ACL (which may let anyone in): an open descriptor, or
    a path whose last part is never followed."""
    try:
        if isinstance(target, int):
            names = os.listxattr(target)
        else:
            names = os.listxattr(target, follow_symlinks=False)
    except OSError:
        return False
    return any(name in _ACL_XATTRS for name in names)


def _may(info: os.stat_result, who: tuple[int, int], bits: tuple[int, int, int]) -> bool:
    """Whether the mode bits give `who` (uid, gid) one of `bits` (owner, group, other)."""
    uid, gid = who
    mode = info.st_mode
    if info.st_uid == uid:
        return bool(mode & bits[0])
    if info.st_gid == gid:
        return bool(mode & bits[1])
    return bool(mode & bits[2])


_WRITE: Final = (stat.S_IWUSR, stat.S_IWGRP, stat.S_IWOTH)
_SEARCH: Final = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)


@dataclass
class _Frame:
    info: os.stat_result
    left: list[str]
    path: str
    renames: bool
    """Whether the writer may add, rename or link entries of this directory as it likes."""


def _frame(fd: int, info: os.stat_result, path: str, rule: Leftovers) -> _Frame:
    renames = False
    if rule.writer is not None and not info.st_mode & stat.S_ISVTX:
        renames = _may(info, rule.writer, _WRITE) or _has_acl(fd)
    return _Frame(info=info, left=_names(fd), path=path, renames=renames)


def _is_leftover(fd: int, name: str, info: os.stat_result, frame: _Frame, rule: Leftovers) -> bool:
    if info.st_uid in rule.owners or name in rule.names:
        return True
    if rule.writer is None or info.st_ctime_ns < rule.since_ns:
        return False
    if frame.renames:
        return True
    if not stat.S_ISREG(info.st_mode):
        return False
    return _may(info, rule.writer, _WRITE) or _has_acl(f"/proc/self/fd/{fd}/{name}")


def _enters(
    fd: int, name: str, info: os.stat_result, parent: os.stat_result, rule: Leftovers
) -> bool:
    if info.st_dev != parent.st_dev or (info.st_dev, info.st_ino) in rule.keep:
        return False
    if rule.everywhere or rule.writer is None:
        return True
    return _may(info, rule.writer, _SEARCH) or _has_acl(f"/proc/self/fd/{fd}/{name}")


def _walk(root: str, rule: Leftovers, removed: list[str], *, strict: bool) -> None:
    """One sweep of one tree (see `sweep_tree`).

    Raises:
        MovedError: a directory moved under the walk.
        OSError: with `strict`, something could not be removed or entered.
    """
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError:
        if strict:
            raise
        return  # missing, or not a real directory: nothing of ours to sweep
    try:
        frames = [_frame(fd, os.fstat(fd), root.rstrip("/"), rule)]
        while frames:
            frame = frames[-1]
            if not frame.left:
                frames.pop()
                if frames:
                    up = _climb(fd, frames[-1].info)
                    os.close(fd)
                    fd = up
                continue
            name = frame.left.pop()
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(info.st_mode) and (info.st_dev, info.st_ino) in rule.keep:
                continue
            path = f"{frame.path}/{name}"
            if _is_leftover(fd, name, info, frame, rule):
                try:
                    remove_entry(fd, name)
                except OSError as exc:
                    if strict:
                        raise
                    log.warning("cannot remove %r (locked instead where a folder): %s", path, exc)
                else:
                    removed.append(path)
                continue
            if stat.S_ISDIR(info.st_mode) and _enters(fd, name, info, frame.info, rule):
                try:
                    child = _descend(fd, name, info)
                except OSError:
                    if strict:
                        raise
                    continue
                os.close(fd)
                fd = child
                frames.append(_frame(fd, info, path, rule))
    finally:
        os.close(fd)


def sweep_tree(root: str, rule: Leftovers, *, attempts: int = 3, strict: bool = False) -> list[str]:
    """Remove the leftovers `rule` describes below `root` (never `root` itself).

    A walk that finds a directory moved under it starts again, up to `attempts` times.

    Returns:
        The paths removed.

    Raises:
        OSError: with `strict`, anything that could not be removed, entered or walked;
            otherwise such failures are logged and the sweep goes on.
    """
    removed: list[str] = []
    for attempt in range(attempts):
        try:
            _walk(root, rule, removed, strict=strict)
        except MovedError as exc:
            if strict and attempt == attempts - 1:
                raise
            log.warning("sweeping %s: %s; starting again", root, exc)
            continue
        except OSError as exc:
            if strict:
                raise
            log.warning("sweeping %s failed: %s", root, exc)
        break
    return removed


def identities(paths: Iterable[str]) -> frozenset[tuple[int, int]]:
    """(st_dev, st_ino) of those of `paths` that are real directories (links not followed)."""
    found = set()
    for path in paths:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            found.add((info.st_dev, info.st_ino))
    return frozenset(found)


# -- the sweeps -----------------------------------------------------------------------------


def _file_time_floor(moment_ns: int) -> int:
    """The earliest file time a change at or after `moment_ns` can carry: file times come
    from the kernel's coarse clock, and some file systems keep whole seconds only."""
    second = 1_000_000_000
    return (moment_ns - CLOCK_TICK_NS) // second * second


@dataclass(frozen=True)
class Sweeper:
    """The sweeps of one daemon: after every check and at the end of the agent phase.

    `shared`: directories everyone may write. `agent_trees`: the agent's own
    trees (source tree, home, archive), which it may have opened to others.
    Neither root's nor the daemon's own user's files are ever swept (tests run
    every part as one user).
    """

    shared: Sequence[str]
    agent_trees: Sequence[str]
    model: Identity
    runner: Identity
    ipc_dir: str = SYSVIPC_DIR
    ipc: bool = True
    python: str = sys.executable

    @staticmethod
    def _sweepable(who: Identity) -> bool:
        return who.uid not in (0, os.geteuid())

    def _sweep(self, roots: Sequence[str], rule: Leftovers) -> list[str]:
        removed: list[str] = []
        seen = identities(roots)
        for root in roots:
            # A root inside another (the archive under /tmp) is swept once, as itself.
            others = seen - identities([root])
            removed += sweep_tree(root, replace(rule, keep=rule.keep | others))
        if self.ipc:
            objects = ipc_leftovers(
                ipc_objects(self.ipc_dir),
                owners=rule.owners,
                writer=rule.writer,
                since_ns=rule.since_ns,
            )
            removed += remove_ipc(objects, python=self.python)
        return removed

    async def after_check(self, since_ns: int) -> list[str]:
        """Remove what sse-runner left or may have written since `since_ns` (a check's start).

        Returns:
            What was removed (paths, and `kind:id` of IPC objects).
        """
        runner = self.runner
        if not self._sweepable(runner):
            return []
        rule = Leftovers(
            owners=frozenset({runner.uid}),
            writer=(runner.uid, runner.gid),
            since_ns=_file_time_floor(since_ns),
            everywhere=False,
        )
        return await asyncio.to_thread(self._sweep, [*self.shared, *self.agent_trees], rule)

    async def after_agent(self) -> list[str]:
        """Remove every entry and IPC object of model and sse-runner in the shared places,
        except the agent's own trees (call once every process of both is gone).

        Returns:
            What was removed.
        """
        owners = frozenset(who.uid for who in (self.model, self.runner) if self._sweepable(who))
        if not owners:
            return []
        rule = Leftovers(owners=owners, keep=identities(self.agent_trees))
        return await asyncio.to_thread(self._sweep, list(self.shared), rule)


def close_dir(path: Path, *, uid: int, gid: int, mode: int) -> str | None:
    """Give a directory to uid:gid with `mode`, through a descriptor (never a link).

    Returns:
        None when done, else why not (missing, or not a real directory).
    """
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return f"{path} is missing"
    except OSError as exc:
        return f"{path} is not a real directory ({exc.strerror})"
    try:
        if os.geteuid() == 0:
            os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return None
