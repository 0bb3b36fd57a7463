"""The agent's diff: its working tree against exactly the content of /ssebench-repo.

Before any listener binds, root reads /ssebench-repo — every file, ignored
ones included, no `.git` folder or file, as `images/tool/setup.py` copied it
into the agent's tree — into a private bare repository
(`<state>/baseline.git`, root's, read-only to others) with `git fast-import`.
Each diff builds a fresh index in a throw-away git directory whose objects
borrow the baseline's: the baseline tree is read into it first, then the
working tree is added (`git add -A`), so every file /ssebench-repo has stays
tracked whatever the agent's `.gitignore` says, and a new file its
`.gitignore` ignores stays out. The diff of that index against the baseline
therefore applies to /ssebench-repo whenever the agent changed only its tree.

The task's protected paths (`ssebench.spec.protected`) are then put back in the
index as the baseline has them, so the agent's changes to them (a
`conftest.py` that passes every test, a test-runner configuration) are in no
diff a check or the grade applies; `TakenDiff.dropped` names them.

Integrity rule (docs/integrity.md): git never honours the agent's configuration,
hooks, attributes or lazy fetch. Nothing of the agent's repository is used
(its history, `.git`, configuration, hooks, attributes, filters, excludes);
every git runs on a private git directory (`_git`). Reading the tree with
`git add` starts no program: hooks, fsmonitor, filters, textconv and external
diffs are off on the command line, no attribute can switch a filter on
(`info/attributes` outranks the tree's), and an embedded repository only has
its HEAD read. Git reads the tree as the tree's owner, never as root.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ssebench.daemon._environ import from_runtime
from ssebench.daemon._errors import ConflictError, InternalError
from ssebench.daemon._messages import ChangedFile, FileStatus
from ssebench.daemon._users import Identity, clean_path, current_identity, identity_of_uid
from ssebench.daemon.server._git import git_argv, git_env, make_git_dir
from ssebench.daemon.server._history import history_log
from ssebench.daemon.server._procs import RunOutput, run
from ssebench.daemon.server._tree import (
    FILE_FLAGS,
    chown_tree,
    open_parent,
    raise_open_file_limit,
    remove_tree,
    send_file,
    walk,
)
from ssebench.spec import contract
from ssebench.spec.atomic import write_atomically
from ssebench.spec.protected import ProtectedPaths

_STATUS: Final[dict[str, FileStatus]] = {
    "A": "added",
    "D": "deleted",
    "M": "modified",
    "T": "type_changed",
}

MAX_DIFF_BYTES: Final = 64 << 20
"""The largest agent diff the daemon holds (it is kept in memory, written to
final.patch and applied): a bigger one is graded `failed` with the reason
(`diff_too_large`), never an out-of-memory kill of the daemon. A real fix is a
few kilobytes; a vendored dependency tree a few megabytes."""

BASELINE_REF: Final = "refs/ssebench/baseline"

_FAST_IMPORT: Final = (
    "-c",
    "pack.depth=0",
    "-c",
    "pack.compression=1",
    "fast-import",
    "--quiet",
    "--done",
)
"""No deltas and light compression: the baseline is read once, at start, and must be quick."""

_COMMIT: Final = (
    f"commit {BASELINE_REF}\n"
    "committer SSEBench <ssebench@ssebench.invalid> 946684800 +0000\n"
    "data 0\n"
).encode()


def _quote(path: bytes) -> bytes:
    """A path as fast-import reads it: C-style quoted, any byte but NUL allowed."""
    out = bytearray(b'"')
    for byte in path:
        if byte in b'"\\':
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _feed_baseline(repo: Path, out: int) -> None:
    """Write /ssebench-repo as one fast-import commit to `out`: regular files and
    symlinks on its file system, nothing under a `.git` (as setup.py copies it)."""
    _write_all(out, _COMMIT)
    parent = open_parent(repo)
    try:
        for visit in walk(parent, repo.name):
            if visit.depth == 0:
                if not visit.is_dir:
                    raise InternalError(f"{repo} is not a folder")
                continue
            if visit.name == ".git":
                visit.descend = False
                continue
            if visit.leaving or visit.fd is not None:
                continue
            path = _quote(os.fsencode(visit.relative()))
            if stat.S_ISLNK(visit.info.st_mode):
                target = os.fsencode(os.readlink(visit.name, dir_fd=visit.parent_fd))
                _write_all(out, b"M 120000 inline %s\ndata %d\n%s\n" % (path, len(target), target))
            elif stat.S_ISREG(visit.info.st_mode):
                fd = os.open(visit.name, FILE_FLAGS, dir_fd=visit.parent_fd)
                try:
                    info = os.fstat(fd)
                    mode = b"100755" if info.st_mode & stat.S_IXUSR else b"100644"
                    _write_all(out, b"M %s inline %s\ndata %d\n" % (mode, path, info.st_size))
                    send_file(fd, out, info.st_size)
                    _write_all(out, b"\n")
                finally:
                    os.close(fd)
    finally:
        os.close(parent)
    _write_all(out, b"done\n")


@dataclass(frozen=True)
class TakenDiff:
    """The agent's diff as checks and the grade apply it, and what was left out of it."""

    patch: bytes
    dropped: list[str]
    """The protected paths the agent changed, added or deleted, sorted: not in `patch`."""


class DiffTaker:
    """Takes the baseline once, then diffs the working tree against it on demand."""

    def __init__(
        self,
        *,
        source: Path,
        repo: Path,
        state_dir: Path,
        environ: Mapping[str, str],
        git: str = "git",
        extra_env: Mapping[str, str] | None = None,
        protected: ProtectedPaths | None = None,
    ) -> None:
        self.source = source
        self.protected = protected or ProtectedPaths(())
        self.repo = repo
        self.state_dir = state_dir
        self.environ = environ
        self.git = git
        self.extra_env = dict(extra_env or {})
        self.baseline_dir = state_dir / "baseline.git"
        self._baseline_file = state_dir / "baseline.tree"
        self.baseline: str | None = None
        self.owner: Identity | None = None

    # -- running git -------------------------------------------------------------

    async def _git(
        self,
        *args: str,
        identity: Identity,
        git_dir: Path,
        cwd: Path,
        work_tree: Path | None = None,
        index: Path | None = None,
        limit: int = 1 << 34,
        timeout: float = 600,
        stdin: bytes | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> RunOutput:
        env = git_env(
            self.environ,
            identity,
            git_dir=git_dir,
            work_tree=work_tree,
            index=index,
            extra={**self.extra_env, **(extra_env or {})},
        )
        return await run(
            git_argv(self.git, *args),
            identity=identity,
            cwd=cwd,
            env=env,
            timeout=timeout,
            limit=limit,
            stdin=stdin,
        )

    @staticmethod
    def _check(output: RunOutput, what: str) -> bytes:
        if output.code != 0:
            detail = output.stderr.text().strip().splitlines()
            raise InternalError(f"{what} failed: {detail[-1] if detail else output.code}")
        return output.stdout.getvalue()

    # -- the baseline --------------------------------------------------------------

    async def snapshot(self) -> str:
        """Read /ssebench-repo into the private baseline (once: a restart reuses it).

        Returns:
            The baseline tree's object name.

        Raises:
            InternalError: /ssebench-repo cannot be read or git failed.
        """
        raise_open_file_limit()
        info = self.source.stat()
        self.owner = identity_of_uid(info.st_uid, info.st_gid)
        self.state_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
        self.state_dir.chmod(0o711)  # the tree's owner must reach the baseline, not list
        root = current_identity()
        kept = await self._kept_baseline(root)
        if kept is not None:
            self.baseline = kept
            return kept
        self._baseline_file.unlink(missing_ok=True)
        await remove_tree(self.baseline_dir)
        await asyncio.to_thread(make_git_dir, self.baseline_dir)
        await asyncio.to_thread(self._import, root)
        tree = self._check(
            await self._git(
                "rev-parse", "--verify", f"{BASELINE_REF}^{{tree}}",
                identity=root, git_dir=self.baseline_dir, cwd=self.baseline_dir,
            ),
            "reading the baseline",
        ).decode().strip()  # fmt: skip
        write_atomically(self._baseline_file, f"{tree}\n".encode())
        self.baseline = tree
        return tree

    async def _kept_baseline(self, root: Identity) -> str | None:
        try:
            tree = self._baseline_file.read_text().strip()
        except FileNotFoundError:
            return None
        found = await self._git(
            "cat-file", "-e", f"{tree}^{{tree}}",
            identity=root, git_dir=self.baseline_dir, cwd=self.state_dir,
        )  # fmt: skip
        return tree if found.code == 0 and tree else None

    def _import(self, root: Identity) -> None:
        """Run `git fast-import` (as root, the baseline's owner) fed from /ssebench-repo."""
        env = git_env(self.environ, root, git_dir=self.baseline_dir, extra=self.extra_env)
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                git_argv(self.git, *_FAST_IMPORT),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                cwd=self.baseline_dir,
                env=env,
                bufsize=0,
                umask=0o022,  # the tree's owner reads the baseline's objects
                close_fds=True,
                start_new_session=True,
            )
            assert proc.stdin is not None
            failure: OSError | None = None
            try:
                _feed_baseline(self.repo, proc.stdin.fileno())
            except BrokenPipeError:
                pass  # fast-import stopped: its message says why
            except OSError as exc:
                failure = exc
            finally:
                proc.stdin.close()
                if failure is not None:
                    proc.kill()
                code = proc.wait()
            errors.seek(0)
            detail = errors.read().decode(errors="replace").strip().splitlines()
        if failure is not None:
            raise InternalError(f"cannot read {self.repo} for the diff baseline: {failure}")
        if code != 0:
            raise InternalError(
                f"taking the diff baseline from {self.repo} failed: "
                f"{detail[-1] if detail else f'git fast-import exited with {code}'}"
            )

    # -- diffs ---------------------------------------------------------------------

    def _private_git_dir(self, work: Path, owner: Identity) -> None:
        make_git_dir(work / "git", alternates=self.baseline_dir / "objects")
        if os.geteuid() == 0:
            chown_tree(work, owner.uid, owner.gid)  # nobody else can reach `work` yet

    def _require_readable(self, owner: Identity) -> None:
        """Refuse a tree whose top its owner closed to itself (git could read nothing).

        Raises:
            ConflictError: code `tree_unreadable`.
        """
        info = self.source.stat()
        if info.st_uid == owner.uid and info.st_mode & 0o500 != 0o500:
            mode = stat.S_IMODE(info.st_mode)
            raise ConflictError(
                f"the source tree {self.source} cannot be read: its owner {owner.name} "
                f"took its own read or search permission away (mode {mode:o})",
                code="tree_unreadable",
            )

    async def _with_index(self, *diff_args: str, limit: int = 1 << 34) -> tuple[bytes, list[str]]:
        if self.baseline is None or self.owner is None:
            raise InternalError("the diff baseline was not taken")
        owner, baseline = self.owner, self.baseline
        self._require_readable(owner)
        work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="diff-", dir=self.state_dir))
        try:
            git_dir, index = work / "git", work / "index"
            await asyncio.to_thread(self._private_git_dir, work, owner)
            git = functools.partial(
                self._git, identity=owner, git_dir=git_dir, index=index, cwd=work
            )
            self._check(await git("read-tree", baseline), "preparing the diff")
            added = await git("add", "-A", "--ignore-errors", work_tree=self.source)
            if added.code != 1:  # 1: some files could not be read; the rest are in the index
                self._check(added, "reading the source tree")
            dropped = await self._drop_protected(git, baseline)
            output = await git(
                "diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv",
                "--no-renames", "--ignore-submodules=none", *diff_args, baseline, limit=limit,
            )  # fmt: skip
            if output.stdout.truncated:
                raise ConflictError(
                    f"the agent's diff is larger than {limit // (1 << 20)} MiB, "
                    "more than the daemon keeps",
                    code="diff_too_large",
                )
            return self._check(output, "taking the diff"), dropped
        finally:
            await remove_tree(work)

    async def _drop_protected(
        self, git: Callable[..., Awaitable[RunOutput]], baseline: str
    ) -> list[str]:
        """Put every protected path the index changed back as the baseline has it (a
        path the baseline lacks leaves the index, and so does an entry of the agent's
        in the way of one put back); the changed paths so dropped, sorted."""
        if not self.protected:
            return []
        changed = await self._changed(git, baseline)
        protected = self.protected.split(changed)[1]
        if not protected:
            return []
        self._check(
            await git(
                # The private git directory is bare, which `reset` refuses; --no-refresh:
                # nothing of a work tree is looked at.
                "-c", "core.bare=false", "reset", "-q", "--no-refresh", baseline,
                "--pathspec-from-file=-", "--pathspec-file-nul",
                stdin=b"".join(os.fsencode(path) + b"\0" for path in protected),
                extra_env={"GIT_LITERAL_PATHSPECS": "1"},
            ),
            "leaving out the protected paths",
        )  # fmt: skip
        left = set(await self._changed(git, baseline))
        return sorted(path for path in changed if path not in left)

    async def _changed(self, git: Callable[..., Awaitable[RunOutput]], baseline: str) -> list[str]:
        names = self._check(
            await git("diff", "--cached", "--name-only", "-z", "--no-renames", baseline),
            "listing the changed paths",
        )
        return [os.fsdecode(name) for name in names.split(b"\0") if name]

    async def take(self) -> TakenDiff:
        """The agent's changes as a binary git diff (empty when there are none), without
        its changes to protected paths.

        Raises:
            ConflictError: the tree's owner closed its top to itself (`tree_unreadable`),
                or the diff is over MAX_DIFF_BYTES (`diff_too_large`).
            InternalError: git failed.
        """
        patch, dropped = await self._with_index("--binary", "--full-index", limit=MAX_DIFF_BYTES)
        return TakenDiff(patch, dropped)

    async def diff(self) -> bytes:
        """`take()`'s patch."""
        return (await self.take()).patch

    async def files(self) -> list[ChangedFile]:
        """The paths the diff touches (protected ones left out, as checks leave them).

        Raises:
            ConflictError: the tree's owner closed its top to itself (`tree_unreadable`).
            InternalError: git failed.
        """
        raw, _ = await self._with_index("--name-status", "-z")
        fields = raw.split(b"\0")
        changed = []
        for status, path in zip(fields[0::2], fields[1::2], strict=False):
            if not status:
                continue
            changed.append(
                ChangedFile(
                    path=path.decode("utf-8", errors="replace"),
                    status=_STATUS.get(status.decode()[:1], "modified"),
                )
            )
        return sorted(changed, key=lambda item: item.path)

    async def commits_log(self) -> str:
        """The agent repository's history, for `commits.log` (see `_history`).

        Returns:
            `git log` of every ref, or lines saying why there is none.

        Raises:
            InternalError: the baseline was not taken.
        """
        if self.owner is None:
            raise InternalError("the diff baseline was not taken")
        return await history_log(
            self.source,
            owner=self.owner,
            state_dir=self.state_dir,
            environ=self.environ,
            git=self.git,
            extra_env=self.extra_env,
        )


def find_git(environ: Mapping[str, str], python: str = sys.executable) -> str:
    """The git the daemon runs: the sealed runtime's (`contract.RUNTIME_GIT`) when the
    daemon runs from the runtime, as in every tool image; never a git of the image,
    whose programs are not root's to run (docs/integrity.md). Outside an SSEBench image
    (the daemon's own tests on a host) the first git on PATH.

    Raises:
        InternalError: there is none.
    """
    if from_runtime(python):
        if not os.access(contract.RUNTIME_GIT, os.X_OK):
            raise InternalError(f"the runtime's git {contract.RUNTIME_GIT} is missing")
        return contract.RUNTIME_GIT
    found = shutil.which("git", path=clean_path(environ.get("PATH")))
    if found is None:
        raise InternalError("git is missing")
    return found
