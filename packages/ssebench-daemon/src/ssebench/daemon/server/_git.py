"""How the daemon runs git: private git directories, its own configuration, nothing else.

Integrity rule (docs/integrity.md): git never honours the agent's configuration,
hooks, attributes or lazy fetch. Every git the daemon starts gets a git
directory the daemon made itself (`make_git_dir`: its own `config`, no
hooks, an `info/attributes` that switches every conversion off, no remote,
no promisor, alternates only where the daemon points them), an environment
with no system or user configuration and no `GIT_*` variable of the image,
lazy fetch off (`GIT_NO_LAZY_FETCH`, for gits that know it; without a
promisor remote in the configuration there is nothing to fetch from anyway),
and `CONFIG` on its command line, which outranks every file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ssebench.daemon._users import Identity, child_env
from ssebench.spec import contract

CONFIG: Final = (
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
    "core.askPass=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "diff.renames=false",
    "diff.external=",
    "log.showSignature=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "protocol.allow=never",
    "safe.directory=*",
)
"""Configuration given on every git command line (it wins over any file)."""

ATTRIBUTES: Final = "* -text -eol -filter -ident -working-tree-encoding !diff !merge\n"
"""`info/attributes` of every private git directory: it outranks the tree's `.gitattributes`,
so no filter, end-of-line or encoding conversion changes what is read or written."""

ISOLATED_ENV: Final = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
}
"""Environment of every git the daemon starts on a private git directory."""

_REPO_CONFIG: Final = (
    "[core]\n"
    "\trepositoryformatversion = 0\n"
    "\tfilemode = true\n"
    "\tbare = true\n"
    "\tlogallrefupdates = false\n"
)


RUNTIME_EXEC_PATH: Final = "/opt/ssebench/tools/libexec/git-core"
"""The runtime git's own programs (images/runtime/assemble.py)."""


def git_argv(git: str, *args: str) -> list[str]:
    """`git --no-pager -c …` (every item of `CONFIG`) followed by `args`; the runtime's
    git looks for its programs in the runtime only, never in the image's git-core."""
    argv = [git, "--no-pager"]
    if git == contract.RUNTIME_GIT:
        argv.append(f"--exec-path={RUNTIME_EXEC_PATH}")
    for item in CONFIG:
        argv += ["-c", item]
    return [*argv, *args]


def git_env(
    environ: Mapping[str, str],
    identity: Identity,
    *,
    git_dir: Path,
    work_tree: Path | None = None,
    index: Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a git run as `identity` on the private `git_dir`.

    The image's environment (for PATH) without any `GIT_*` variable of its own.
    """
    env = {
        name: value
        for name, value in child_env(environ, identity, extra=extra).items()
        if not name.startswith("GIT_")
    }
    env.update(ISOLATED_ENV)
    env["GIT_DIR"] = str(git_dir)
    if work_tree is not None:
        env["GIT_WORK_TREE"] = str(work_tree)
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    return env


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    path.chmod(0o644)


def make_git_dir(path: Path, *, alternates: Path | None = None) -> None:
    """Lay out a new bare git directory at `path` (which must not exist) by hand.

    Call it only where nobody else can write (a fresh folder in root's state
    directory); hand it over afterwards with `chown_tree` when another user's
    git must write to it. Folders are 0755 and files 0644 whatever the umask.

    Args:
        path: the new git directory.
        alternates: an objects folder whose objects this one may use.

    Raises:
        OSError: it cannot be made.
    """
    for folder in ("", "objects", "objects/info", "objects/pack", "refs", "refs/heads", "info"):
        (path / folder).mkdir(mode=0o755)
        (path / folder).chmod(0o755)
    _write(path / "HEAD", "ref: refs/heads/main\n")
    _write(path / "config", _REPO_CONFIG)
    _write(path / "info" / "attributes", ATTRIBUTES)
    _write(path / "info" / "exclude", "")
    if alternates is not None:
        _write(path / "objects" / "info" / "alternates", f"{alternates}\n")
