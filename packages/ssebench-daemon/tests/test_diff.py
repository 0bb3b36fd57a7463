"""Diff capture on temporary git repositories (as the test's own user).

Every case checks the strongest property there is: the captured diff, applied
with `git apply --binary` to a pristine copy of the initial commit, rebuilds
the agent's working tree exactly (contents, modes, symlinks), whatever the
agent did to `.git`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from ssebench.daemon._diff import DiffTaker

from .fakes import fake_privileges, make_project

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
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
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

    def __init__(self, tmp_path: Path) -> None:
        self.source = tmp_path / "source"
        self.pristine = tmp_path / "pristine"
        make_project(self.source)
        (self.source / "run.sh").write_text("#!/bin/sh\necho run\n")
        (self.source / "blob.bin").write_bytes(bytes(range(256)) * 4)
        git(self.source, "init", "-q", "-b", "main")
        git(self.source, "add", "-A")
        git(self.source, "commit", "-q", "-m", "initial")
        shutil.copytree(
            self.source, self.pristine, symlinks=True, ignore=shutil.ignore_patterns(".git")
        )
        self.differ = DiffTaker(
            source=self.source,
            repo=self.pristine,
            state_dir=tmp_path / "state",
            environ={"PATH": os.environ["PATH"]},
            extra_env=fake_privileges().extra_env,
        )
        asyncio.run(self.differ.snapshot())

    def diff(self) -> bytes:
        return asyncio.run(self.differ.diff())

    def files(self) -> dict[str, str]:
        return {item.path: item.status for item in asyncio.run(self.differ.files())}

    def assert_diff_rebuilds_the_tree(self) -> bytes:
        patch = self.diff()
        target = self.pristine.parent / "applied"
        shutil.copytree(self.pristine, target, symlinks=True)
        (target.parent / "final.patch").write_bytes(patch)
        if patch:
            subprocess.run(
                ["git", "apply", "--binary", str(target.parent / "final.patch")],
                cwd=target,
                env={"PATH": os.environ["PATH"], **GIT_ENV},
                check=True,
                capture_output=True,
            )
        assert snapshot(target) == snapshot(self.source)
        shutil.rmtree(target)
        return patch


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


def test_an_untouched_tree_has_an_empty_diff(repo: Repo) -> None:
    assert repo.diff() == b""
    assert repo.files() == {}


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


def test_the_baseline_is_the_initial_commit_not_uncommitted_work(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    (repo.source / "lib.txt").write_text("changed after the baseline\n")
    assert b"+changed after the baseline" in repo.diff()
    # A second daemon start (a restart) keeps diffing against the initial commit.
    asyncio.run(repo.differ.snapshot())
    assert b"+changed after the baseline" in repo.diff()


def test_commits_log_records_the_agents_history_or_why_there_is_none(repo: Repo) -> None:
    (repo.source / "lib.txt").write_text("fixed\n")
    git(repo.source, "commit", "-q", "-a", "-m", "my fix")
    assert "my fix" in asyncio.run(repo.differ.commits_log())
    shutil.rmtree(repo.source / ".git")
    assert ".git was removed" in asyncio.run(repo.differ.commits_log())
