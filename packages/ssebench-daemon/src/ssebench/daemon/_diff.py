"""The agent's diff: its working tree against a private copy of the initial commit.

Before any listener binds, the initial commit is fetched into a private bare
repository (`<state>/baseline.git`, then made root-owned and read-only). Each
diff builds a fresh index in a throw-away git directory whose objects borrow
the baseline's, adds the whole working tree (`git add -A`), and diffs that
against the baseline. Nothing of the agent's repository is used: not its
history (rewritten, amended or deleted `.git` change nothing), configuration,
hooks, attributes, filters or excludes. The agent's `.gitignore` files are
honoured, as git always does. Git runs as the tree's owner, so the tree is
read with that user's permissions, never root's.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ssebench.daemon._checks import ISOLATED_GIT_ENV
from ssebench.daemon._errors import InternalError
from ssebench.daemon._messages import ChangedFile, FileStatus
from ssebench.daemon._procs import (
    Identity,
    RunOutput,
    child_env,
    clean_path,
    identity_of_uid,
    run,
)
from ssebench.daemon._tree import remove_tree

_CONFIG: Final = (
    "core.hooksPath=/dev/null",
    "core.attributesFile=/dev/null",
    "core.excludesFile=/dev/null",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.eol=lf",
    "core.fileMode=true",
    "core.symlinks=true",
    "core.ignoreCase=false",
    "core.precomposeUnicode=false",
    "core.quotePath=true",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.splitIndex=false",
    "core.sparseCheckout=false",
    "core.pager=cat",
    "core.sshCommand=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "diff.renames=false",
    "diff.external=",
    "log.showSignature=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "safe.directory=*",
    "uploadpack.allowAnySHA1InWant=false",
)
"""Configuration given on every git command line (it wins over any file)."""

ATTRIBUTES: Final = "* -text -eol -filter -ident -working-tree-encoding !diff !merge\n"
"""`info/attributes` of every private git directory: it outranks the tree's `.gitattributes`,
so no filter, end-of-line or encoding conversion changes what is read."""

_STATUS: Final[dict[str, FileStatus]] = {
    "A": "added",
    "D": "deleted",
    "M": "modified",
    "T": "type_changed",
}


def _git_argv(git: str, *args: str) -> list[str]:
    argv = [git, "--no-pager"]
    for item in _CONFIG:
        argv += ["-c", item]
    return [*argv, *args]


class DiffTaker:
    """Takes the baseline once, then diffs the working tree against it on demand."""

    def __init__(
        self,
        *,
        source: Path,
        state_dir: Path,
        environ: Mapping[str, str],
        git: str = "git",
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.source = source
        self.state_dir = state_dir
        self.environ = environ
        self.git = git
        self.extra_env = dict(extra_env or {})
        self.baseline_dir = state_dir / "baseline.git"
        self.baseline: str | None = None
        self.owner: Identity | None = None

    # -- running git -------------------------------------------------------------

    def _env(self, owner: Identity, git_dir: Path | None, index: Path | None) -> dict[str, str]:
        env = child_env(self.environ, owner, extra=self.extra_env)
        env.update(ISOLATED_GIT_ENV)
        env.update(LC_ALL="C", GIT_OPTIONAL_LOCKS="0", GIT_NO_REPLACE_OBJECTS="1")
        if git_dir is not None:
            env.update(GIT_DIR=str(git_dir), GIT_WORK_TREE=str(self.source))
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        return env

    async def _git(
        self,
        *args: str,
        owner: Identity,
        git_dir: Path | None = None,
        index: Path | None = None,
        cwd: Path | None = None,
        limit: int = 1 << 34,
    ) -> RunOutput:
        return await run(
            _git_argv(self.git, *args),
            identity=owner,
            cwd=cwd or self.source,
            env=self._env(owner, git_dir, index),
            timeout=600,
            limit=limit,
        )

    @staticmethod
    def _check(output: RunOutput, what: str) -> bytes:
        if output.code != 0:
            detail = output.stderr.text().strip().splitlines()
            raise InternalError(f"{what} failed: {detail[-1] if detail else output.code}")
        return output.stdout.getvalue()

    # -- the baseline --------------------------------------------------------------

    async def snapshot(self) -> str:
        """Copy the initial commit (the source tree's HEAD) into the private baseline.

        Falls back to the working tree as it is when the tree has no commit.

        Returns:
            The baseline tree's object name.

        Raises:
            InternalError: git failed.
        """
        info = self.source.stat()
        owner = identity_of_uid(info.st_uid, info.st_gid)
        self.owner = owner
        self.state_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
        self.state_dir.chmod(0o711)  # model must reach the baseline, not list
        await remove_tree(self.baseline_dir)
        self._prepare_git_dir(self.baseline_dir, owner, alternates=False)
        await self._git("init", "-q", "--bare", "--template=", str(self.baseline_dir), owner=owner)
        fetched = await self._git(
            "fetch", "-q", "--no-tags", "--no-recurse-submodules", str(self.source),
            "+HEAD:refs/ssebench/baseline",
            owner=owner, git_dir=self.baseline_dir,
        )  # fmt: skip
        if fetched.code == 0:
            tree = self._check(
                await self._git(
                    "rev-parse", "refs/ssebench/baseline^{tree}",
                    owner=owner, git_dir=self.baseline_dir,
                ),
                "reading the initial commit",
            )  # fmt: skip
        else:
            index = self.baseline_dir / "snapshot-index"
            self._check(
                await self._git("add", "-A", owner=owner, git_dir=self.baseline_dir, index=index),
                "snapshotting the source tree",
            )
            tree = self._check(
                await self._git("write-tree", owner=owner, git_dir=self.baseline_dir, index=index),
                "snapshotting the source tree",
            )
            index.unlink()
        self.baseline = tree.decode().strip()
        await asyncio.to_thread(self._freeze, self.baseline_dir)
        return self.baseline

    @staticmethod
    def _freeze(path: Path) -> None:
        """Root owns the baseline; everyone may read it, nobody else may change it."""
        for dirpath, dirnames, filenames in os.walk(path):
            for name in [*dirnames, *filenames, ""]:
                entry = Path(dirpath, name)
                if entry.is_symlink():
                    continue
                if os.geteuid() == 0:
                    os.lchown(entry, 0, 0)
                entry.chmod(0o755 if entry.is_dir() else 0o444)

    def _prepare_git_dir(self, git_dir: Path, owner: Identity, *, alternates: bool) -> None:
        (git_dir / "info").mkdir(parents=True)
        (git_dir / "info" / "attributes").write_text(ATTRIBUTES)
        (git_dir / "info" / "exclude").write_text("")
        if alternates:
            (git_dir / "objects" / "info").mkdir(parents=True)
            (git_dir / "objects" / "info" / "alternates").write_text(
                f"{self.baseline_dir / 'objects'}\n"
            )
        if os.geteuid() == 0:
            for dirpath, dirnames, filenames in os.walk(git_dir):
                for name in [*dirnames, *filenames, ""]:
                    os.lchown(Path(dirpath, name), owner.uid, owner.gid)

    # -- diffs ---------------------------------------------------------------------

    async def _with_index(self, *diff_args: str) -> bytes:
        if self.baseline is None or self.owner is None:
            raise InternalError("the diff baseline was not taken")
        owner = self.owner
        work = Path(tempfile.mkdtemp(prefix="diff-", dir=self.state_dir))
        try:
            if os.geteuid() == 0:
                os.chown(work, owner.uid, owner.gid)
            git_dir, index = work / "git", work / "index"
            self._prepare_git_dir(git_dir, owner, alternates=True)
            self._check(
                await self._git("init", "-q", "--bare", "--template=", str(git_dir), owner=owner),
                "preparing the diff",
            )
            added = await self._git(
                "add", "-A", "--ignore-errors", owner=owner, git_dir=git_dir, index=index
            )
            if added.code != 0 and not index.exists():
                self._check(added, "reading the source tree")
            return self._check(
                await self._git(
                    "diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv",
                    "--no-renames", "--ignore-submodules=none", *diff_args, self.baseline,
                    owner=owner, git_dir=git_dir, index=index,
                ),
                "taking the diff",
            )  # fmt: skip
        finally:
            await remove_tree(work)

    async def diff(self) -> bytes:
        """The agent's changes as a binary git diff (empty when there are none).

        Raises:
            InternalError: git failed.
        """
        return await self._with_index("--binary", "--full-index")

    async def files(self) -> list[ChangedFile]:
        """The paths the diff touches.

        Raises:
            InternalError: git failed.
        """
        raw = await self._with_index("--name-status", "-z")
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
        """The agent repository's history, for `commits.log` (read with its config overridden).

        Returns:
            `git log` of every ref, or a line saying why there is none.
        """
        owner = self.owner
        if owner is None:
            raise InternalError("the diff baseline was not taken")
        git_dir = self.source / ".git"
        if not git_dir.exists():
            return f"no git repository in {self.source}: .git was removed\n"
        output = await self._git(
            "log", "--all", "--no-color", "--format=fuller", "--name-status",
            "--no-ext-diff", "--no-textconv", "--no-show-signature", "-n", "1000",
            owner=owner, limit=16 << 20,
        )  # fmt: skip
        if output.code != 0:
            return f"git log failed in {self.source}:\n{output.stderr.text()}"
        return output.stdout.text()


def find_git(environ: Mapping[str, str]) -> str:
    """The image's git (the tool layer guarantees /usr/bin/git).

    Raises:
        InternalError: there is none.
    """
    found = shutil.which("git", path=clean_path(environ.get("PATH"))) or shutil.which(
        "git", path="/usr/bin:/bin"
    )
    if found is None:
        raise InternalError("git is missing from the image")
    return found
