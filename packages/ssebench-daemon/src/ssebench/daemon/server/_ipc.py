"""SysV IPC objects (shared memory, semaphores, message queues): listed, chosen, removed.

They outlive the processes that made them, so they are shared places like /tmp:
`_sweep` removes those of sse-runner after every check and those of model and
sse-runner at the end of the agent phase (docs/integrity.md: what a check left in
shared writable places is gone before `model` runs again). The kernel lists
them in /proc/sysvipc, so no tool of the case image is needed; root without
CAP_SYS_ADMIN (a container's) may not remove another user's object, so each
goes by IPC_RMID from a short process running as its creator, who always may.
"""

from __future__ import annotations

import logging
import stat
import subprocess
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from ssebench.daemon._users import Identity, as_user

log = logging.getLogger("ssebench.daemon")

SYSVIPC_DIR: Final = "/proc/sysvipc"
"""Where the kernel lists the SysV IPC objects of the daemon's IPC namespace."""

IpcKind = Literal["shm", "sem", "msg"]

_IPC_ID: Final[dict[IpcKind, str]] = {"shm": "shmid", "sem": "semid", "msg": "msqid"}
_IPC_TIMES: Final[dict[IpcKind, tuple[str, ...]]] = {
    "shm": ("atime", "dtime", "ctime"),
    "sem": ("otime", "ctime"),
    "msg": ("stime", "rtime", "ctime"),
}


@dataclass(frozen=True)
class IpcObject:
    """One SysV IPC object as /proc/sysvipc lists it."""

    kind: IpcKind
    id: int
    perms: int
    uid: int
    gid: int
    cuid: int
    cgid: int
    used: int
    """The latest of its attach, operation, send, receive and change times (seconds)."""


def ipc_objects(directory: str = SYSVIPC_DIR) -> list[IpcObject]:
    """Every SysV IPC object of the daemon's IPC namespace (none when the kernel lists none)."""
    found = []
    for kind in ("shm", "sem", "msg"):
        try:
            lines = Path(directory, kind).read_text().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        header = lines[0].split()
        for line in lines[1:]:
            values = dict(zip(header, line.split(), strict=False))
            try:
                found.append(
                    IpcObject(
                        kind=kind,
                        id=int(values[_IPC_ID[kind]]),
                        perms=int(values["perms"], 8),
                        uid=int(values["uid"]),
                        gid=int(values["gid"]),
                        cuid=int(values["cuid"]),
                        cgid=int(values["cgid"]),
                        used=max(int(values[name]) for name in _IPC_TIMES[kind]),
                    )
                )
            except (KeyError, ValueError):
                continue
    return found


def ipc_leftovers(
    objects: Iterable[IpcObject],
    *,
    owners: Collection[int],
    writer: tuple[int, int] | None = None,
    since_ns: int = 0,
) -> list[IpcObject]:
    """The objects owned or made by one of `owners`, and those `writer` (uid, gid) may
    write that were used since `since_ns` (the sweeps' rule for files, for IPC)."""
    chosen = []
    for obj in objects:
        if obj.uid in owners or obj.cuid in owners:
            chosen.append(obj)
        elif writer is not None and obj.used >= since_ns // 1_000_000_000:
            uid, gid = writer
            mode = obj.perms
            writable = (
                (obj.uid == uid or obj.cuid == uid)
                or (gid in (obj.gid, obj.cgid) and mode & stat.S_IWGRP)
                or mode & stat.S_IWOTH
            )
            if writable:
                chosen.append(obj)
    return chosen


_IPC_RMID: Final = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
failed = []
for item in sys.argv[1:]:
    kind, ident = item.split(":")
    ident = int(ident)
    if kind == "shm":
        done = libc.shmctl(ident, 0, None)
    elif kind == "sem":
        done = libc.semctl(ident, 0, 0)
    else:
        done = libc.msgctl(ident, 0, None)
    if done != 0 and ctypes.get_errno() not in (22, 43):  # EINVAL, EIDRM: already gone
        failed.append(item)
if failed:
    print(" ".join(failed), file=sys.stderr)
    sys.exit(1)
"""
"""IPC_RMID (0) on each `kind:id` argument, through the C library."""


def remove_ipc(objects: Sequence[IpcObject], *, python: str = sys.executable) -> list[str]:
    """Remove IPC objects, each as its creator (root without CAP_SYS_ADMIN may not remove
    another user's objects, their creator always may).

    Args:
        objects: what to remove.
        python: the Python that does it as each creator (the runtime's, which everyone may run).

    Returns:
        `kind:id` of each object removed.
    """
    by_creator: dict[tuple[int, int], list[IpcObject]] = {}
    for obj in objects:
        by_creator.setdefault((obj.cuid, obj.cgid), []).append(obj)
    removed = []
    for (uid, gid), group in by_creator.items():
        items = [f"{obj.kind}:{obj.id}" for obj in group]
        who = Identity(name=str(uid), uid=uid, gid=gid, home="/")
        try:
            done = subprocess.run(
                [python, "-I", "-S", "-c", _IPC_RMID, *items],
                env={},
                cwd="/",
                check=False,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=60,
                **as_user(who),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("cannot remove the IPC objects of uid %d: %s", uid, exc)
            continue
        failed = set(done.stderr.decode(errors="replace").split()) if done.returncode else set()
        if failed:
            log.warning("IPC objects of uid %d not removed: %s", uid, " ".join(sorted(failed)))
        removed += [item for item in items if item not in failed]
    return removed
