"""The sweeper on real files owned by other users (the tests run as root, as the daemon does).

Made-up uids stand for `model` and `sse-runner`: files are given to them with chown,
and SysV IPC objects are made by processes running as them.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import struct
import subprocess
import time
from pathlib import Path

import pytest

from ssebench.daemon._users import Identity
from ssebench.daemon.server._ipc import ipc_leftovers, ipc_objects, remove_ipc
from ssebench.daemon.server._sweep import (
    Leftovers,
    Sweeper,
    close_dir,
    identities,
    remove_entry,
    sweep_tree,
)
from ssebench.daemon.server._tree import copy_tree

from .test_tree import descriptors_into

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="giving files to other users needs root (the daemon is root)"
)

MODEL = Identity(name="model", uid=61000, gid=61000, home="/nonexistent")
RUNNER = Identity(name="sse-runner", uid=61999, gid=61999, home="/nonexistent")
AS_RUNNER = Leftovers(owners=frozenset({RUNNER.uid}), writer=(RUNNER.uid, RUNNER.gid))


def make(path: Path, who: Identity | None, mode: int, text: str | None = "data") -> Path:
    """A file (or, with text None, a folder) owned by `who` (root when None)."""
    if text is None:
        path.mkdir()
    else:
        path.write_text(text)
    if who is not None:
        os.chown(path, who.uid, who.gid)
    path.chmod(mode)
    return path


def shared(tmp_path: Path) -> Path:
    """A sticky folder everyone may write, like /tmp."""
    return make(tmp_path / "shared", None, 0o1777, None)


def since_now() -> int:
    """A moment strictly between what a test made before and what it changes after."""
    time.sleep(0.05)
    moment = time.time_ns()
    time.sleep(0.05)
    return moment


def during_check(since: int) -> Leftovers:
    return Leftovers(
        owners=AS_RUNNER.owners, writer=AS_RUNNER.writer, since_ns=since, everywhere=False
    )


def test_a_runner_file_in_a_folder_the_agent_opened_to_everyone_goes_and_the_agents_stay(
    tmp_path: Path,
) -> None:
    root = shared(tmp_path)
    drop = make(root / "drop", MODEL, 0o777, None)
    mine = make(drop / "mine", MODEL, 0o644)
    open_file = make(drop / "open-but-untouched", MODEL, 0o666)
    since = since_now()
    make(drop / "poc-copy", RUNNER, 0o644, "POC")
    nested = make(drop / "nested", RUNNER, 0o755, None)
    make(nested / "deeper", RUNNER, 0o644, "POC")
    make(root / "top-level", RUNNER, 0o600)

    removed = sweep_tree(str(root), during_check(since))

    assert sorted(removed) == sorted([f"{drop}/poc-copy", f"{drop}/nested", f"{root}/top-level"])
    assert mine.read_text() == "data"
    assert open_file.read_text() == "data"  # nobody changed it while the check ran
    assert drop.is_dir()


def test_a_file_of_the_agent_the_runner_wrote_into_goes_and_an_untouched_one_stays(
    tmp_path: Path,
) -> None:
    root = shared(tmp_path)
    written = make(root / "written", MODEL, 0o666)
    untouched = make(root / "untouched", MODEL, 0o666)
    readable = make(root / "readable", MODEL, 0o644)
    since = since_now()
    written.write_text("POC")  # in a sticky folder only the file's own rights count
    readable.chmod(0o644)  # changed, but the runner could never write it

    removed = sweep_tree(str(root), during_check(since))

    assert removed == [str(written)]
    assert untouched.read_text() == "data"
    assert readable.read_text() == "data"


def test_an_entry_renamed_in_an_open_folder_goes_even_when_the_runner_cannot_write_it(
    tmp_path: Path,
) -> None:
    root = shared(tmp_path)
    plain = make(root / "plain", MODEL, 0o777, None)  # not sticky: anyone renames anything
    make(plain / "a", MODEL, 0o644)
    kept = make(plain / "b", MODEL, 0o644)
    since = since_now()
    (plain / "a").rename(plain / "UE9DIGJ5dGVz")

    assert sweep_tree(str(root), during_check(since)) == [f"{plain}/UE9DIGJ5dGVz"]
    assert kept.exists()


def set_acl(path: Path, uid: int) -> None:
    """A POSIX ACL giving `uid` read and write (the kernel's xattr format)."""
    undefined = 0xFFFFFFFF
    entries = [(1, 6, undefined), (2, 6, uid), (4, 4, undefined), (0x10, 6, undefined)]
    entries.append((0x20, 4, undefined))
    data = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)
    os.setxattr(path, "system.posix_acl_access", data)


def test_a_file_an_acl_opens_to_the_runner_counts_as_writable(tmp_path: Path) -> None:
    root = shared(tmp_path)
    target = make(root / "acl", MODEL, 0o644)
    try:
        set_acl(target, RUNNER.uid)
    except OSError as exc:
        pytest.skip(f"this file system keeps no POSIX ACLs: {exc}")
    since = since_now()
    target.write_text("POC")
    assert sweep_tree(str(root), during_check(since)) == [str(target)]


def test_links_are_removed_never_followed(tmp_path: Path) -> None:
    root = shared(tmp_path)
    outside = make(tmp_path / "outside", RUNNER, 0o755, None)
    precious = make(outside / "precious", RUNNER, 0o644)
    link = root / "link"
    link.symlink_to(outside)
    os.chown(link, RUNNER.uid, RUNNER.gid, follow_symlinks=False)
    agent_link = root / "agent-link"
    agent_link.symlink_to(outside)
    os.chown(agent_link, MODEL.uid, MODEL.gid, follow_symlinks=False)

    assert sweep_tree(str(root), AS_RUNNER) == [str(link)]
    assert precious.read_text() == "data"
    assert agent_link.is_symlink()
    # Removing an entry whose parts are links removes the link, not what it points to.
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        remove_entry(fd, "agent-link")
    finally:
        os.close(fd)
    assert precious.exists()


def test_a_tree_thousands_of_folders_deep_goes_with_two_descriptors(tmp_path: Path) -> None:
    root = shared(tmp_path)
    top = make(root / "deep", RUNNER, 0o755, None)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(os.open("POC", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)

    assert sweep_tree(str(root), AS_RUNNER) == [str(top)]
    assert not top.exists()
    assert descriptors_into(top) == []


def test_the_agent_trees_are_left_alone_and_only_searchable_folders_are_entered(
    tmp_path: Path,
) -> None:
    root = shared(tmp_path)
    archive = make(root / "archive", RUNNER, 0o755, None)
    make(archive / "dialog.jsonl", RUNNER, 0o644)
    closed = make(root / "closed", MODEL, 0o700, None)
    inside = make(closed / "inside", RUNNER, 0o644)

    rule = Leftovers(
        owners=AS_RUNNER.owners,
        writer=AS_RUNNER.writer,
        keep=identities([str(archive)]),
        everywhere=False,
    )
    assert sweep_tree(str(root), rule) == []
    assert (archive / "dialog.jsonl").exists()
    assert inside.exists()  # the runner could never reach it
    # Walking everywhere (as at the end of the agent phase) finds it.
    everywhere = Leftovers(owners=AS_RUNNER.owners, keep=identities([str(archive)]))
    assert sweep_tree(str(root), everywhere) == [str(inside)]


def test_the_sweeper_after_the_agent_phase_removes_model_and_runner_files_but_its_trees(
    tmp_path: Path,
) -> None:
    root = shared(tmp_path)
    archive = make(root / "sse-archive", MODEL, 0o755, None)
    dialog = make(archive / "dialog.jsonl", MODEL, 0o644)
    socket_like = make(root / "sse.sock", None, 0o666)
    other = make(root / ".X11-unix", None, 0o1777, None)
    make(other / "X0", MODEL, 0o600)
    make(root / "model-file", MODEL, 0o600)
    make(root / "runner-file", RUNNER, 0o600)
    sweeper = Sweeper(
        shared=[str(root)], agent_trees=[str(archive)], model=MODEL, runner=RUNNER, ipc=False
    )
    removed = asyncio.run(sweeper.after_agent())

    assert sorted(removed) == sorted([f"{other}/X0", f"{root}/model-file", f"{root}/runner-file"])
    assert dialog.exists()
    assert socket_like.exists()
    assert other.is_dir()


def test_the_sweeper_after_a_check_also_sweeps_the_agent_trees(tmp_path: Path) -> None:
    root = shared(tmp_path)
    source = make(tmp_path / "source", MODEL, 0o755, None)
    drop = make(source / "drop", MODEL, 0o777, None)
    make(source / "lib.txt", MODEL, 0o644)
    since = time.time_ns()
    make(drop / "poc-copy", RUNNER, 0o644, "POC")
    sweeper = Sweeper(
        shared=[str(root)], agent_trees=[str(source)], model=MODEL, runner=RUNNER, ipc=False
    )
    assert asyncio.run(sweeper.after_check(since)) == [f"{drop}/poc-copy"]
    assert (source / "lib.txt").exists()


def test_a_copy_leaves_out_every_git_at_any_depth(tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / ".git" / "objects").mkdir(parents=True)
    (source / ".git" / "objects" / "pack").write_text("history")
    (source / "sub").mkdir()
    (source / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    (source / "sub" / "code.c").write_text("int x;\n")
    (source / "keep.git").write_text("not git\n")
    tree = tmp_path / "copy"
    asyncio.run(copy_tree(source, tree, owner=None, skip=[".git"]))
    left = sorted(str(path.relative_to(tree)) for path in tree.rglob("*"))
    assert left == ["keep.git", "sub", "sub/code.c"]


def test_close_dir_changes_a_real_folder_and_never_follows_a_link(tmp_path: Path) -> None:
    folder = make(tmp_path / "archive", MODEL, 0o777, None)
    assert close_dir(folder, uid=0, gid=MODEL.gid, mode=0o750) is None
    info = folder.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (0, MODEL.gid, 0o750)
    target = make(tmp_path / "target", MODEL, 0o777, None)
    link = tmp_path / "link"
    link.symlink_to(target)
    problem = close_dir(link, uid=0, gid=0, mode=0o700)
    assert problem is not None and "not a real directory" in problem
    assert target.stat().st_mode & 0o7777 == 0o777
    assert "missing" in str(close_dir(tmp_path / "nothing", uid=0, gid=0, mode=0o700))


MAKE_IPC = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget(0, 4096, 0o1000 | int(sys.argv[1], 8))
sem = libc.semget(0, 1, 0o1000 | int(sys.argv[1], 8))
msg = libc.msgget(0, 0o1000 | int(sys.argv[1], 8))
print(shm, sem, msg)
"""


def make_ipc(who: Identity, mode: str) -> tuple[int, int, int]:
    """A shared memory segment, a semaphore set and a message queue made by `who`."""
    done = subprocess.run(
        [OTHERS_PYTHON, "-I", "-S", "-c", MAKE_IPC, mode],
        user=who.uid,
        group=who.gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        check=True,
    )
    shm, sem, msg = (int(value) for value in done.stdout.split())
    assert min(shm, sem, msg) >= 0, done.stdout
    return shm, sem, msg


OTHERS_PYTHON = "/usr/bin/python3"
"""A Python other users may run (the tests' own may live in root's home)."""


def ipc_ids() -> set[tuple[str, int]]:
    return {(obj.kind, obj.id) for obj in ipc_objects()}


@pytest.mark.process
def test_ipc_objects_of_the_runner_go_as_their_creator_and_others_stay() -> None:
    if not Path("/proc/sysvipc/shm").exists():
        pytest.skip("this kernel lists no SysV IPC objects")
    if not os.access(OTHERS_PYTHON, os.X_OK):
        pytest.skip(f"{OTHERS_PYTHON} is missing: the IPC objects are made by other users")
    assert ctypes.CDLL(None).shmget  # the C library the helper uses
    runner = make_ipc(RUNNER, "600")
    model_private = make_ipc(MODEL, "600")
    model_open = make_ipc(MODEL, "666")
    try:
        since = time.time_ns() - 5_000_000_000
        chosen = ipc_leftovers(
            ipc_objects(), owners={RUNNER.uid}, writer=(RUNNER.uid, RUNNER.gid), since_ns=since
        )
        chosen_ids = {(obj.kind, obj.id) for obj in chosen}
        runners = set(zip(("shm", "sem", "msg"), runner, strict=True))
        opened = set(zip(("shm", "sem", "msg"), model_open, strict=True))
        assert runners | opened <= chosen_ids  # the open ones were made "during the check"
        assert not set(zip(("shm", "sem", "msg"), model_private, strict=True)) & chosen_ids
        sweeper = Sweeper(
            shared=[], agent_trees=[], model=MODEL, runner=RUNNER, python=OTHERS_PYTHON
        )
        removed = asyncio.run(sweeper.after_check(since))
        assert {f"{kind}:{ident}" for kind, ident in runners | opened} == set(removed)
        assert not (runners | opened) & ipc_ids()
        assert set(zip(("shm", "sem", "msg"), model_private, strict=True)) <= ipc_ids()
        # After the agent phase, model's own go too.
        asyncio.run(sweeper.after_agent())
        assert not set(zip(("shm", "sem", "msg"), model_private, strict=True)) & ipc_ids()
    finally:
        leftovers = [obj for obj in ipc_objects() if obj.cuid in (RUNNER.uid, MODEL.uid)]
        if leftovers:
            remove_ipc(leftovers, python=OTHERS_PYTHON)
