"""`commits.log`: the agent's history, read from a private copy of its refs and objects.

Integrity rules (docs/integrity.md): git never honours the agent's configuration,
hooks, attributes or lazy fetch; no privileged operation follows a path
through a tree the agent can write. git never runs on the agent's `.git`.
Root copies from it only what `git log` needs — `HEAD` (when it names a ref
or a commit), `packed-refs`, `shallow`, `refs/`, loose objects and packs
(`.pack`, `.idx`) — fd-relatively, never through a link, only regular files
the tree's owner owns, within `MAX_HISTORY_FILES` and `MAX_HISTORY_BYTES`,
into a git directory the daemon made (`_git.make_git_dir`): no configuration,
hooks, alternates or promisor remote of the agent's. git log runs there as the
tree's owner, lazy fetch off; an object the agent deleted makes commits.log
say so, and nothing is fetched.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ssebench.daemon._users import Identity
from ssebench.daemon.server._git import git_argv, git_env, make_git_dir
from ssebench.daemon.server._procs import run
from ssebench.daemon.server._tree import (
    DIR_FLAGS,
    FILE_FLAGS,
    Visit,
    copy_file_at,
    remove_tree,
    walk,
)

MAX_HISTORY_FILES: Final = 250_000
"""Files copied from the agent's `.git` at most."""

MAX_HISTORY_BYTES: Final = 2 << 30
"""Bytes copied from the agent's `.git` at most."""

MAX_REF_DEPTH: Final = 32
"""Folders under `refs/` followed at most this deep."""

LOG_LIMIT: Final = 16 << 20
"""Bytes of `git log` kept in commits.log."""

_HEAD: Final = re.compile(rb"(ref: refs/[^\0\n]{1,1000}|[0-9a-f]{40}|[0-9a-f]{64})\n?")
_FANOUT: Final = re.compile(r"[0-9a-f]{2}")
_LOOSE: Final = re.compile(r"[0-9a-f]{38}|[0-9a-f]{62}")
_PACK: Final = re.compile(r"pack-[0-9a-f]{40,64}\.(pack|idx)")


class _NoHistoryError(Exception):
    """The agent's tree holds no history root may read; the message says why."""


@dataclass
class _Copy:
    """What was copied, within the caps, and what was left out."""

    owner_uid: int
    files: int = 0
    size: int = 0
    skipped: list[str] = field(default_factory=list)
    full: bool = False

    def take(self, visit: Visit, into: int) -> None:
        info = visit.info
        if not stat.S_ISREG(info.st_mode) or info.st_uid != self.owner_uid:
            self.skipped.append(visit.relative() or visit.name)
            return
        if self.files + 1 > MAX_HISTORY_FILES or self.size + info.st_size > MAX_HISTORY_BYTES:
            self.full = True
            return
        try:
            copy_file_at(
                visit.parent_fd, visit.name, into, visit.name, mode=0o644, uid=self.owner_uid
            )
        except OSError:
            self.skipped.append(visit.relative() or visit.name)
            return
        self.files += 1
        self.size += info.st_size

    def mirror(
        self, src_fd: int, name: str, dst_fd: int, keep: Callable[[Visit], bool], depth: int
    ) -> None:
        """Copy what `keep` selects of the folder `name`, as far as `depth` levels down."""
        made: list[int | None] = []  # per folder entered: its copy, or None when skipped
        try:
            for visit in walk(src_fd, name):
                if visit.leaving:
                    done = made.pop()
                    if done is not None:
                        os.close(done)
                    continue
                into = made[-1] if made else dst_fd
                assert into is not None  # nothing under a skipped folder is visited
                if visit.fd is None:
                    if keep(visit):
                        self.take(visit, into)
                elif visit.depth > depth or not keep(visit):
                    visit.descend = False
                    made.append(None)
                else:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(visit.name, 0o755, dir_fd=into)
                    made.append(os.open(visit.name, DIR_FLAGS, dir_fd=into))
        finally:
            for fd in made:
                if fd is not None:
                    os.close(fd)


def _keep_object(visit: Visit) -> bool:
    if visit.depth == 0:
        return True
    if visit.depth == 1:
        return visit.is_dir and (visit.name == "pack" or bool(_FANOUT.fullmatch(visit.name)))
    if visit.is_dir:
        return False
    if visit.names[-1] == "pack":
        return bool(_PACK.fullmatch(visit.name))
    return bool(_LOOSE.fullmatch(visit.name))


def _read_head(git_fd: int) -> bytes | None:
    try:
        fd = os.open("HEAD", FILE_FLAGS, dir_fd=git_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, 1100)
    finally:
        os.close(fd)
    return data if _HEAD.fullmatch(data) else None


def _copy_history(source: Path, dest: Path, owner_uid: int) -> _Copy:
    """Copy what git log needs from `source/.git` into the private git directory `dest`.

    Raises:
        _NoHistoryError: there is no `.git` folder to read.
    """
    copy = _Copy(owner_uid)
    top = os.open(source, DIR_FLAGS & ~os.O_NOFOLLOW)  # its parent is root's
    try:
        try:
            git_fd = os.open(".git", DIR_FLAGS, dir_fd=top)
        except FileNotFoundError:
            raise _NoHistoryError(f"no git repository in {source}: .git was removed") from None
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            raise _NoHistoryError(
                f"no git repository in {source}: .git is not a folder (a file or a link), "
                "so it was not read"
            ) from None
    finally:
        os.close(top)
    dst = os.open(dest, DIR_FLAGS)
    try:
        head = _read_head(git_fd)
        if head is not None:
            os.unlink("HEAD", dir_fd=dst)
            fd = os.open("HEAD", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dst)
            try:
                os.write(fd, head.rstrip(b"\n") + b"\n")
            finally:
                os.close(fd)
        for name in ("packed-refs", "shallow"):
            for visit in walk(git_fd, name):
                if visit.fd is None and not visit.leaving:
                    copy.take(visit, dst)
        copy.mirror(git_fd, "refs", dst, lambda _: True, MAX_REF_DEPTH)
        copy.mirror(git_fd, "objects", dst, _keep_object, 2)
    finally:
        os.close(dst)
        os.close(git_fd)
    return copy


async def history_log(
    source: Path,
    *,
    owner: Identity,
    state_dir: Path,
    environ: Mapping[str, str],
    git: str,
    extra_env: Mapping[str, str],
) -> str:
    """`git log` of every ref of the agent's repository, from a private copy of it.

    Args:
        source: the agent's tree (its `.git` is read, never run git on).
        owner: the tree's owner; git log runs as this user.
        state_dir: root's private folder (0711) where the copy is made.
        environ: the image's environment (PATH).
        git: the git program.
        extra_env: added to git's environment (tests tag processes with it).

    Returns:
        What commits.log holds: notes on what was left out, then the log, or why there is none.
    """
    work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="history-", dir=state_dir))
    try:
        work.chmod(0o711)  # the owner's git reads the copy, root's own
        dest = work / "git"
        await asyncio.to_thread(make_git_dir, dest)
        try:
            copy = await asyncio.to_thread(_copy_history, source, dest, owner.uid)
        except _NoHistoryError as exc:
            return f"{exc}\n"
        except OSError as exc:
            return f"the history in {source}/.git cannot be read: {exc}\n"
        output = await run(
            git_argv(
                git, "log", "--all", "--no-color", "--format=fuller", "--name-status",
                "--no-renames", "--no-ext-diff", "--no-textconv", "--no-show-signature",
                "-n", "1000",
            ),
            identity=owner,
            cwd=work,
            env=git_env(environ, owner, git_dir=dest, extra=extra_env),
            timeout=300,
            limit=LOG_LIMIT,
        )  # fmt: skip
    finally:
        await remove_tree(work)
    notes = []
    if copy.full:
        notes.append(
            f"# the agent's .git is larger than {MAX_HISTORY_FILES} files or "
            f"{MAX_HISTORY_BYTES >> 20} MiB: only part of it was read\n"
        )
    if copy.skipped:
        shown = ", ".join(copy.skipped[:20])
        notes.append(
            f"# left out of the agent's .git ({len(copy.skipped)}: links, other owners' "
            f"or special files): {shown}\n"
        )
    if output.code != 0:
        return "".join(
            [*notes, f"git log failed in {source} (exit {output.code}):\n", output.stderr.text()]
        )
    return "".join(notes) + (output.stdout.text() or "(no commits)\n")
