"""Root's walks over trees others can write: links planted (also while a walk runs) are
never followed, and no depth makes a walk fail.

The attacks run for real: a thread swaps folders for links to a canary folder
while the tree is removed, and the canary must keep its mode, owner and
contents; trees 1500 folders deep (deeper than Python's recursion limit and
than `MAX_OPEN_DIRS`) are removed, copied, handed over and walked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssebench.daemon.server._tree import (
    MAX_OPEN_DIRS,
    chown_tree,
    copy_tree,
    open_parent,
    remove_tree,
    remove_tree_sync,
    walk,
)

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="changing owners needs root")
NOBODY = 65534
DEPTH = 1500


def open_fds() -> int:
    return sum(1 for _ in Path("/proc/self/fd").iterdir())


def descriptors_into(folder: Path) -> list[str]:
    """What this process's open descriptors name inside `folder` (deleted or not). Not a
    count of the process's descriptors: other threads of a test worker open and close
    theirs meanwhile (counts fell from 26 to 19 and from 25 to 17 in CI runs)."""
    found = []
    for entry in Path("/proc/self/fd").iterdir():
        try:
            target = str(entry.readlink())
        except FileNotFoundError:
            continue  # closed meanwhile
        except OSError as exc:
            # Only the deep tree has names past PATH_MAX in a test worker.
            found.append(f"descriptor {entry.name}: {exc.strerror}")
            continue
        if target.startswith(f"{folder}/") or target in (str(folder), f"{folder} (deleted)"):
            found.append(target)
    return found


def make_deep(top: Path, depth: int, name: str = "d") -> list[str]:
    """`top/d/d/…/d/deep.txt`, made fd-relatively (the path may pass PATH_MAX)."""
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        file = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o640, dir_fd=fd)
        os.write(file, b"at the bottom\n")
        os.close(file)
        os.symlink("/etc/passwd", "link", dir_fd=fd)
    finally:
        os.close(fd)
    return [name] * depth


def read_deep(top: Path, parts: list[str]) -> tuple[bytes, os.stat_result, os.stat_result]:
    """The deep file's contents and lstat, and the link's lstat, read fd-relatively."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
        file = os.open("deep.txt", os.O_RDONLY, dir_fd=fd)
        data = os.read(file, 100)
        os.close(file)
        info = os.stat("deep.txt", dir_fd=fd, follow_symlinks=False)
        link = os.stat("link", dir_fd=fd, follow_symlinks=False)
        return data, info, link
    finally:
        os.close(fd)


@pytest.fixture
def canary(tmp_path: Path) -> Iterator[Path]:
    """A folder only root may change, with a file in it; it must never change."""
    path = tmp_path / "canary"
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    (path / "keep.txt").write_text("canary\n")
    (path / "keep.txt").chmod(0o644)
    before = state(path)
    yield path
    assert state(path) == before, "an operation reached the canary through a link"


def state(path: Path) -> list[tuple[str, int, int, int, bytes]]:
    found = []
    for entry in (path, path / "keep.txt"):
        info = entry.lstat()
        data = entry.read_bytes() if entry.is_file() else b""
        found.append((str(entry), info.st_mode, info.st_uid, info.st_gid, data))
    return found


def test_a_link_to_a_folder_is_removed_never_followed(tmp_path: Path, canary: Path) -> None:
    top = tmp_path / "tree"
    (top / "sub").mkdir(parents=True)
    (top / "sub" / "to-canary").symlink_to(canary)
    (top / "to-canary-file").symlink_to(canary / "keep.txt")
    locked = top / "locked"
    locked.mkdir()
    (locked / "inside").write_text("x")
    locked.chmod(0)
    asyncio.run(remove_tree(top))
    assert not top.exists()
    # The top itself a link: the link goes, the folder it names stays.
    link = tmp_path / "top-link"
    link.symlink_to(canary)
    asyncio.run(remove_tree(link))
    assert not link.is_symlink() and canary.is_dir()
    asyncio.run(remove_tree(tmp_path / "missing"))


def _swap(name: Path, aside: Path, canary: Path, *, to_link: bool) -> None:
    try:
        if to_link:
            name.rename(aside)
            name.symlink_to(canary)
        else:
            name.unlink()
            aside.rename(name)
            (name / "inner").mkdir(exist_ok=True)
    except OSError:
        pass


def _race(shared: Path, canary: Path, stop: threading.Event) -> None:
    """Swap the folder and each folder in it for links to the canary and back, again and
    again: half of the time they are links."""
    pairs = [(shared, shared.with_name("shared.aside"))]
    pairs += [(shared / f"d{i}", shared / f"d{i}.aside") for i in range(30)]
    while not stop.is_set():
        for to_link in (True, False):
            for name, aside in pairs:
                _swap(name, aside, canary, to_link=to_link)
            time.sleep(0.001)


def test_swapping_folders_for_links_while_a_tree_is_removed_never_reaches_the_canary(
    tmp_path: Path, canary: Path
) -> None:
    """What sse-runner can do to its own folder in /tmp while the sweep removes it (on
    1bf8a76 the canary became 0700 in a few rounds of every hundred)."""
    tmp_path.chmod(0o1777)  # like /tmp
    shared = tmp_path / "shared"
    before = state(canary)
    for _ in range(100):
        for i in range(30):
            (shared / f"d{i}" / "inner").mkdir(parents=True)
            (shared / f"d{i}" / "inner" / "f").write_text("x")
        stop = threading.Event()
        racer = threading.Thread(target=_race, args=(shared, canary, stop))
        racer.start()
        try:
            time.sleep(0.002)
            # The tree may keep changing under the removal: it may give up, never follow.
            with contextlib.suppress(OSError):
                remove_tree_sync(shared)
        finally:
            stop.set()
            racer.join()
        for leftover in (shared, shared.with_name("shared.aside")):
            remove_tree_sync(leftover)
            assert not os.path.lexists(leftover)
        assert state(canary) == before, "the removal reached the canary through a link"


@needs_root
def test_handing_a_tree_over_changes_links_themselves_not_what_they_name(
    tmp_path: Path, canary: Path
) -> None:
    top = tmp_path / "copy"
    (top / "sub").mkdir(parents=True)
    (top / "sub" / "file").write_text("x")
    (top / "sub" / "to-canary").symlink_to(canary)
    (top / "to-canary-file").symlink_to(canary / "keep.txt")
    chown_tree(top, NOBODY, NOBODY)
    for path in (top, top / "sub", top / "sub" / "file", top / "sub" / "to-canary"):
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == (NOBODY, NOBODY), path
    assert (top / "to-canary-file").lstat().st_uid == NOBODY


@needs_root
def test_a_tree_deeper_than_the_recursion_limit_is_copied_handed_over_and_removed(
    tmp_path: Path,
) -> None:
    parts = make_deep(tmp_path / "repo", DEPTH)
    copy = tmp_path / "copy"
    asyncio.run(copy_tree(tmp_path / "repo", copy, owner=(NOBODY, NOBODY)))
    data, info, link = read_deep(copy, parts)
    assert data == b"at the bottom\n"
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (NOBODY, NOBODY, 0o640)
    assert stat.S_ISLNK(link.st_mode) and link.st_uid == NOBODY
    # Owners kept (owner=None), modes too.
    mirror = tmp_path / "mirror"
    asyncio.run(copy_tree(copy, mirror, owner=None))
    data, info, link = read_deep(mirror, parts)
    assert data == b"at the bottom\n"
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (NOBODY, 0o640)
    bottom = _open_bottom(mirror, parts)
    assert os.readlink("link", dir_fd=bottom) == "/etc/passwd"
    os.close(bottom)
    for tree in (tmp_path / "repo", copy, mirror):
        asyncio.run(remove_tree(tree))
        assert not tree.exists()
    assert descriptors_into(tmp_path) == [], "a walk left descriptors open"


def _open_bottom(top: Path, parts: list[str]) -> int:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for part in parts:
        child = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    return fd


def test_a_walk_past_path_max_visits_everything_with_few_descriptors(tmp_path: Path) -> None:
    depth = 3 * MAX_OPEN_DIRS + 7
    parts = make_deep(tmp_path / "tree", depth, name="x" * 200)  # ~40 KB of path
    fds = open_fds()
    parent = open_parent(tmp_path / "tree")
    most = 0
    seen: list[str] = []
    try:
        for visit in walk(parent, "tree"):
            most = max(most, open_fds() - fds)
            if not visit.is_dir:
                seen.append(visit.relative())
    finally:
        os.close(parent)
    prefix = "/".join(parts)
    assert sorted(seen) == [f"{prefix}/deep.txt", f"{prefix}/link"]
    assert most <= MAX_OPEN_DIRS + 4
    remove_tree_sync(tmp_path / "tree")
    assert not (tmp_path / "tree").exists()
    assert descriptors_into(tmp_path) == []


def test_a_folder_moved_away_during_a_walk_stops_it(tmp_path: Path) -> None:
    depth = MAX_OPEN_DIRS + 10
    make_deep(tmp_path / "tree", depth)
    parent = open_parent(tmp_path / "tree")
    try:
        with pytest.raises(OSError, match="changed while it was being walked"):
            for visit in walk(parent, "tree"):
                if visit.depth == depth and visit.fd is not None:
                    # The walk let go of the top folders' descriptors by now; it opens
                    # them again through `..` and must notice the folder is another.
                    (tmp_path / "tree" / "d").rename(tmp_path / "elsewhere")
                    (tmp_path / "tree" / "d").mkdir()
    finally:
        os.close(parent)


@pytest.mark.process
def test_folders_the_daemon_may_not_enter_are_opened_through_their_descriptor() -> None:
    """Without root (as the tests of other users run it): own read-only and closed
    folders are made u+rwx through a descriptor of exactly that folder, then removed."""
    base = Path(tempfile.mkdtemp(prefix="sse-tree-", dir="/tmp"))
    try:
        base.chmod(0o755)
        spot = base / "spot"
        top = spot / "tree"
        (top / "ro" / "closed").mkdir(parents=True)
        (top / "ro" / "closed" / "f").write_text("x")
        if ROOT:
            for path in (spot, top, top / "ro", top / "ro" / "closed", top / "ro" / "closed" / "f"):
                os.chown(path, NOBODY, NOBODY)
        (top / "ro" / "closed").chmod(0)
        (top / "ro").chmod(0o555)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                if ROOT:
                    os.setgroups([])
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                remove_tree_sync(top)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert not top.exists()
    finally:
        remove_tree_sync(base)


def test_a_copy_keeps_modes_times_and_links_and_leaves_special_files_out(
    tmp_path: Path, canary: Path
) -> None:
    src = tmp_path / "src"
    (src / "bin").mkdir(parents=True)
    (src / "bin" / "tool").write_text("#!/bin/sh\n")
    (src / "bin" / "tool").chmod(0o751)
    (src / "data.bin").write_bytes(bytes(range(256)) * 1000)
    os.utime(src / "data.bin", ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    (src / "to-canary").symlink_to(canary)
    (src / "dangling").symlink_to("nowhere")
    os.mkfifo(src / "fifo")
    (src / "ro").mkdir()
    (src / "ro" / "f").write_text("x")
    (src / "ro").chmod(0o555)
    dst = tmp_path / "dst"
    asyncio.run(copy_tree(src, dst, owner=None))
    assert (dst / "bin" / "tool").stat().st_mode & 0o777 == 0o751
    assert (dst / "data.bin").read_bytes() == (src / "data.bin").read_bytes()
    assert (dst / "data.bin").stat().st_mtime_ns == 1_000_000_000_000_000_000
    assert (dst / "to-canary").readlink() == canary
    assert str((dst / "dangling").readlink()) == "nowhere"
    assert not os.path.lexists(dst / "fifo")
    assert (dst / "ro").stat().st_mode & 0o777 == 0o555
    assert (dst / "ro" / "f").read_text() == "x"
    remove_tree_sync(dst)
