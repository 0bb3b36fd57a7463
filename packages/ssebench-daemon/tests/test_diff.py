"""Diff capture on temporary git repositories.

Every case checks the strongest property there is: the captured diff, applied
with `git apply --binary` to a pristine copy of the project as the image ships
it (/ssebench-repo: ignored files included, no `.git`), rebuilds the agent's
working tree exactly (contents, modes, symlinks), whatever the agent did to
`.git` or `.gitignore`. As root, the attacks on git run the tree's git as its
owner for real (`nobody`).
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssebench.daemon._errors import ConflictError
from ssebench.daemon.server._diff import DiffTaker
from ssebench.daemon.server._tree import remove_tree_sync
from ssebench.spec.protected import ProtectedPaths

from .fakes import fake_privileges, make_project
from .test_tree import make_deep, read_deep

pytestmark = pytest.mark.process

NOBODY = 65534

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "agent",
    "GIT_AUTHOR_EMAIL": "agent@example.invalid",
    "GIT_COMMITTER_NAME": "agent",
    "GIT_COMMITTER_EMAIL": "agent@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), **GIT_ENV}
    argv = ["git", "-c", "safe.directory=*", *args]
    done = subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
    return done.stdout.decode()


def snapshot(root: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every entry under `root` but `.git`: kind, contents or link target, and mode."""
    found: dict[str, tuple[str, bytes, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames + [d for d in dirnames if Path(dirpath, d).is_symlink()]:
            path = Path(dirpath, name)
            relative = str(path.relative_to(root))
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", str(path.readlink()).encode(), 0)
            else:
                found[relative] = ("file", path.read_bytes(), info.st_mode & 0o111)
    return found


class Repo:
    """The agent's source tree (a one-commit repository), its pristine copy, and the differ."""

    def __init__(
        self, tmp_path: Path, *, owner: int | None = None, protected: tuple[str, ...] = ()
    ) -> None:
        self.source = tmp_path / "source"
        self.pristine = tmp_path / "pristine"
        make_project(self.source)
        (self.source / "run.sh").write_text("#!/bin/sh\necho run\n")
        (self.source / "blob.bin").write_bytes(bytes(range(256)) * 4)
        # Files the project's .gitignore ignores but the image ships (generated ones).
        (self.source / ".gitignore").write_text("*.gen\n")
        (self.source / "shipped.gen").write_text("generated when the image was built\n")
        git(self.source, "init", "-q", "-b", "main")
        git(self.source, "add", "-A")
        git(self.source, "commit", "-q", "-m", "initial")
        shutil.copytree(
            self.source, self.pristine, symlinks=True, ignore=shutil.ignore_patterns(".git")
        )
        if owner is not None:
            for path in (self.source, *self.source.rglob("*")):
                os.chown(path, owner, owner, follow_symlinks=False)
        self.differ = DiffTaker(
            source=self.source,
            repo=self.pristine,
            state_dir=tmp_path / "state",
            environ={"PATH": os.environ["PATH"]},
            extra_env=fake_privileges().extra_env,
            protected=ProtectedPaths(protected),
        )
        asyncio.run(self.differ.snapshot())

    def diff(self) -> bytes:
        return asyncio.run(self.differ.diff())

    def files(self) -> dict[str, str]:
        return {item.path: item.status for item in asyncio.run(self.differ.files())}

    def applied(self, patch: bytes) -> Path:
        """A copy of the pristine project with `patch` applied (it must apply)."""
        target = self.pristine.parent / "applied"
        remove_tree_sync(target)
        shutil.copytree(self.pristine, target, symlinks=True)
        (target.parent / "final.patch").write_bytes(patch)
        if patch:
            done = subprocess.run(
                ["git", "apply", "--binary", str(target.parent / "final.patch")],
                cwd=target,
                env={"PATH": os.environ["PATH"], **GIT_ENV},
                check=False,
                capture_output=True,
            )
            assert done.returncode == 0, done.stderr.decode(errors="replace")
        return target

    def assert_diff_rebuilds_the_tree(self) -> bytes:
        patch = self.diff()
        target = self.applied(patch)
        assert snapshot(target) == snapshot(self.source)
        remove_tree_sync(target)
        return patch


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temporary folder other users can reach (pytest's own are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="sse-diff-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    remove_tree_sync(path)


def test_an_untouched_tree_has_an_empty_diff(repo: Repo) -> None:
    assert repo.diff() == b""
    assert repo.files() == {}


def test_changes_to_protected_paths_are_left_out_of_the_diff_and_named(tmp_path: Path) -> None:
    repo = Repo(tmp_path, protected=("conftest.py", "tests/**", "*.pth"))
    pristine = snapshot(repo.pristine)
    (repo.source / "lib.txt").write_text("refuses every input\n")
    (repo.source / "conftest.py").write_text("def pytest_runtest_makereport(): ...\n")
    (repo.source / "deep" / "er").mkdir(parents=True)
    (repo.source / "deep" / "er" / "conftest.py").symlink_to("/etc/passwd")
    (repo.source / "tests" / "basic.sh").write_text("exit 0\n")
    (repo.source / "tests" / "new\nline.sh").write_text("exit 0\n")
    (repo.source / "site.pth").write_text("import evil\n")
    shutil.rmtree(repo.source / ".git")

    taken = asyncio.run(repo.differ.take())

    assert taken.dropped == [
        "conftest.py",
        "deep/er/conftest.py",
        "site.pth",
        "tests/basic.sh",
        "tests/new\nline.sh",
    ]
    graded = snapshot(repo.applied(taken.patch))
    assert graded == {**pristine, "lib.txt": ("file", b"refuses every input\n", 0)}
    assert repo.files() == {"lib.txt": "modified"}
    # A protected file the agent deleted comes back too.
    (repo.source / "tests" / "basic.sh").unlink()
    assert "tests/basic.sh" in asyncio.run(repo.differ.take()).dropped
    assert snapshot(repo.applied(repo.diff()))["tests/basic.sh"] == pristine["tests/basic.sh"]
    # A file of the agent's where a protected folder was goes too, and is named.
    shutil.rmtree(repo.source / "tests")
    (repo.source / "tests").write_text("exit 0\n")
    assert {"tests", "tests/basic.sh"} <= set(asyncio.run(repo.differ.take()).dropped)
    assert snapshot(repo.applied(repo.diff()))["tests/basic.sh"] == pristine["tests/basic.sh"]


def test_rewritten_history_does_not_hide_changes(repo: Repo) -> None:
    (repo.source / "lib.txt").write_text("fixed\n")
    git(repo.source, "add", "-A")
    git(repo.source, "commit", "-q", "-m", "fix")
    # A new root commit holding the changed tree: the old initial commit is gone.
    git(repo.source, "checkout", "-q", "--orphan", "rewritten")
    git(repo.source, "commit", "-q", "-m", "history rewritten")
    git(repo.source, "branch", "-D", "main")
    git(repo.source, "reflog", "expire", "--expire=now", "--all")
    git(repo.source, "gc", "-q", "--prune=now")
    patch = repo.assert_diff_rebuilds_the_tree()
    assert b"-bug\n+fixed\n" in patch
    assert repo.files() == {"lib.txt": "modified"}


def test_an_amended_initial_commit_does_not_hide_changes(repo: Repo) -> None:
    (repo.source / "lib.txt").write_text("amended\n")
    git(repo.source, "commit", "-q", "-a", "--amend", "-m", "initial")
    assert git(repo.source, "status", "--porcelain") == ""
    assert b"+amended" in repo.assert_diff_rebuilds_the_tree()


def test_a_deleted_git_directory_changes_nothing(repo: Repo) -> None:
    (repo.source / "lib.txt").write_text("fixed\n")
    shutil.rmtree(repo.source / ".git")
    assert b"+fixed" in repo.assert_diff_rebuilds_the_tree()
    assert repo.files() == {"lib.txt": "modified"}


def test_binary_files_mode_changes_and_symlinks_come_out_right(repo: Repo) -> None:
    (repo.source / "blob.bin").write_bytes(bytes(reversed(range(256))) * 8 + b"\0\xff")
    (repo.source / "new.bin").write_bytes(b"\0\x01\x02" * 1000)
    (repo.source / "run.sh").chmod(0o755)
    (repo.source / "link").symlink_to("lib.txt")
    (repo.source / "README").unlink()
    (repo.source / "README").symlink_to("/etc/passwd")
    (repo.source / "tests" / "basic.sh").unlink()
    patch = repo.assert_diff_rebuilds_the_tree()
    assert b"GIT binary patch" in patch
    assert b"old mode 100644\nnew mode 100755" in patch
    assert repo.files() == {
        "README": "type_changed",
        "blob.bin": "modified",
        "link": "added",
        "new.bin": "added",
        "run.sh": "modified",
        "tests/basic.sh": "deleted",
    }


def test_names_with_spaces_newlines_and_unicode_come_out_right(repo: Repo) -> None:
    (repo.source / "with space.txt").write_text("space\n")
    (repo.source / "with\nnewline.txt").write_text("newline\n")
    (repo.source / "ünï cødé.txt").write_text("unicode\n")
    (repo.source / "lib.txt").rename(repo.source / "lib renamed.txt")
    repo.assert_diff_rebuilds_the_tree()
    assert repo.files() == {
        "lib renamed.txt": "added",
        "lib.txt": "deleted",
        "with space.txt": "added",
        "with\nnewline.txt": "added",
        "ünï cødé.txt": "added",
    }


def test_the_agents_git_configuration_hooks_and_attributes_are_ignored(repo: Repo) -> None:
    marker = repo.source.parent / "hook-ran"
    config = repo.source / ".git" / "config"
    config.write_text(
        config.read_text()
        + "[core]\n\tautocrlf = true\n\tattributesFile = /dev/null\n\tfileMode = false\n"
        + "[diff]\n\tnoprefix = true\n\texternal = /bin/false\n"
        + '[filter "hide"]\n\tclean = sed s/fixed/bug/\n\tsmudge = cat\n'
        + f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = /tmp\n"
    )
    (repo.source / ".git" / "info").mkdir(exist_ok=True)
    (repo.source / ".git" / "info" / "attributes").write_text("* filter=hide\n")
    (repo.source / ".git" / "info" / "exclude").write_text("secret.txt\n")
    (repo.source / "lib.txt").write_text("fixed\r\n")
    (repo.source / "secret.txt").write_text("excluded only by the agent's .git/info/exclude\n")
    (repo.source / ".gitattributes").write_text("*.txt filter=hide -diff\n")
    (repo.source / "run.sh").chmod(0o755)
    patch = repo.assert_diff_rebuilds_the_tree()
    assert b"diff --git a/lib.txt b/lib.txt" in patch
    assert b"+fixed\r\n" in patch
    assert b"new mode 100755" in patch
    assert "secret.txt" in repo.files()
    assert "initial" in asyncio.run(repo.differ.commits_log())
    assert not marker.exists()


def test_the_baseline_is_the_shipped_project_not_uncommitted_work(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    (repo.source / "lib.txt").write_text("changed after the baseline\n")
    assert b"+changed after the baseline" in repo.diff()
    # A second daemon start (a restart, e.g. after grading patched /ssebench-repo)
    # keeps diffing against the project as it was first read.
    (repo.pristine / "lib.txt").write_text("changed after the baseline\n")
    asyncio.run(repo.differ.snapshot())
    assert b"+changed after the baseline" in repo.diff()


def test_commits_log_records_the_agents_history_or_why_there_is_none(repo: Repo) -> None:
    (repo.source / "lib.txt").write_text("fixed\n")
    git(repo.source, "commit", "-q", "-a", "-m", "my fix")
    assert "my fix" in asyncio.run(repo.differ.commits_log())
    shutil.rmtree(repo.source / ".git")
    assert ".git was removed" in asyncio.run(repo.differ.commits_log())


def test_an_ignored_file_the_image_ships_is_graded_when_changed_or_un_ignored(
    repo: Repo,
) -> None:
    # Changed while still ignored: tracked all the same (it is in /ssebench-repo).
    (repo.source / "shipped.gen").write_text("changed by the agent\n")
    (repo.source / "fresh.gen").write_text("a new ignored file stays out\n")
    patch = repo.diff()
    assert repo.files() == {"shipped.gen": "modified"}
    target = repo.applied(patch)
    assert (target / "shipped.gen").read_text() == "changed by the agent\n"
    assert not (target / "fresh.gen").exists()
    # Un-ignored: the diff modifies the file /ssebench-repo has (on 1bf8a76 it added it,
    # and `git apply` refused: "already exists in working directory").
    (repo.source / "fresh.gen").unlink()
    (repo.source / ".gitignore").write_text("")
    patch = repo.assert_diff_rebuilds_the_tree()
    assert b"new file" not in patch
    assert repo.files() == {".gitignore": "modified", "shipped.gen": "modified"}


PROMISOR = """\
[core]
\trepositoryformatversion = 1
[extensions]
\tpartialClone = origin
[remote "origin"]
\turl = {url}
\tpromisor = true
\tpartialclonefilter = blob:none
\tuploadpack = "sh -c 'touch {marker}; setsid sleep 1000 </dev/null >/dev/null 2>&1 & exit 1'"
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="running git as the tree's owner needs root")
def test_a_promisor_remote_in_the_agents_repository_never_runs_its_command(
    open_tmp: Path,
) -> None:
    tmp_path = open_tmp
    spot = tmp_path / "spot"
    spot.mkdir()
    os.chown(spot, NOBODY, NOBODY)
    marker = spot / "lazy-fetch-ran"
    repo = Repo(tmp_path, owner=NOBODY)
    (repo.source / "lib.txt").write_text("fixed\n")
    git(repo.source, "commit", "-q", "-am", "my fix")
    git_dir = repo.source / ".git"
    (git_dir / "config").write_text(PROMISOR.format(url=repo.source, marker=marker))
    tree = git(repo.source, "rev-parse", "HEAD^{tree}").strip()
    (git_dir / "objects" / tree[:2] / tree[2:]).unlink()  # a "missing" object to fetch
    for path in (repo.source, *repo.source.rglob("*")):
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    # The trap is armed: git log on the agent's repository, as its owner, runs it.
    armed = subprocess.run(
        ["git", "log", "--all", "--name-status", "-n", "5"],
        cwd=repo.source,
        env={"PATH": os.environ["PATH"], "HOME": str(spot), **GIT_ENV},
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        capture_output=True,
        check=False,
    )
    assert marker.exists(), armed.stderr.decode(errors="replace")
    marker.unlink()
    subprocess.run(["pkill", "-KILL", "-u", str(NOBODY), "-x", "sleep"], check=False)

    log = asyncio.run(repo.differ.commits_log())
    assert "git log failed" in log
    assert "my fix" not in log or tree in log  # it stopped at the missing object
    assert b"+fixed" in repo.assert_diff_rebuilds_the_tree()
    time.sleep(0.3)
    assert not marker.exists(), "the agent's lazy fetch ran"


def test_commits_log_reads_packed_history_and_never_a_linked_git_folder(
    repo: Repo, tmp_path: Path
) -> None:
    (repo.source / "lib.txt").write_text("fixed\n")
    git(repo.source, "commit", "-q", "-am", "packed fix")
    git(repo.source, "gc", "-q", "--prune=now")
    assert not list((repo.source / ".git" / "objects").glob("??/*"))
    log = asyncio.run(repo.differ.commits_log())
    assert "packed fix" in log and "initial" in log
    assert "M\tlib.txt" in log
    # A .git that is a link (to a repository root may read, the agent may not) is not read.
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    git(other, "commit", "-q", "--allow-empty", "-m", "someone else's history")
    shutil.rmtree(repo.source / ".git")
    (repo.source / ".git").symlink_to(other / ".git")
    log = asyncio.run(repo.differ.commits_log())
    assert ".git is not a folder" in log and "someone else" not in log


def test_a_file_1500_folders_deep_is_in_the_diff_and_the_diff_applies(repo: Repo) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # git holds a descriptor per folder level: with the usual soft limit it would
    # silently skip the file; the daemon lifts the limit when it takes the baseline.
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        asyncio.run(repo.differ.snapshot())
        parts = make_deep(repo.source / "deep", 1500)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 4096
        patch = repo.diff()
        target = repo.applied(patch)
        data, _, link = read_deep(target / "deep", parts)
        assert data == b"at the bottom\n"
        assert stat.S_ISLNK(link.st_mode)
        assert "/".join(["deep", *parts, "deep.txt"]) in repo.files()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        remove_tree_sync(repo.source / "deep")
        remove_tree_sync(repo.pristine.parent / "applied")


def test_a_tree_its_owner_closed_to_itself_is_a_clear_conflict(repo: Repo) -> None:
    repo.source.chmod(0)
    try:
        with pytest.raises(ConflictError) as caught:
            repo.diff()
    finally:
        repo.source.chmod(0o755)
    assert caught.value.code == "tree_unreadable"
    assert "cannot be read" in caught.value.message


def test_nested_repositories_and_gitmodules_start_nothing(repo: Repo) -> None:
    marker = repo.source.parent / "ran"
    nested = repo.source / "vendor"
    nested.mkdir()
    (nested / "code.c").write_text("int x;\n")
    git(nested, "init", "-q")
    git(nested, "add", "-A")
    git(nested, "commit", "-q", "-m", "vendored")
    trap = f"touch {marker}"
    with (nested / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {trap}\n\tpager = {trap}\n\thooksPath = hooks\n")
    (nested / "hooks").mkdir()
    for hook in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction"):
        (nested / "hooks" / hook).write_text(f"#!/bin/sh\n{trap}\n")
        (nested / "hooks" / hook).chmod(0o755)
    (repo.source / ".gitmodules").write_text(
        f'[submodule "vendor"]\n\tpath = vendor\n\turl = ./vendor\n\tupdate = !{trap}\n'
    )
    (repo.source / ".gitattributes").write_text("* filter=lfs diff=lfs merge=lfs\n")
    (repo.source / "lib.txt").write_text("fixed\n")
    patch = repo.diff()
    assert b"+fixed" in patch
    assert "vendor" in repo.files()
    assert "initial" in asyncio.run(repo.differ.commits_log())
    assert not marker.exists()


def test_a_diff_over_the_daemon_s_bound_is_refused_not_held(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ssebench.daemon.server import _diff

    monkeypatch.setattr(_diff, "MAX_DIFF_BYTES", 1 << 20)
    (repo.source / "huge.bin").write_bytes(os.urandom(3 << 20))

    with pytest.raises(ConflictError) as refused:
        repo.diff()

    assert refused.value.code == "diff_too_large"
    assert "larger than 1 MiB" in str(refused.value)
