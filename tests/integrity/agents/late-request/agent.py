"""Hole 6 of issue 13: in-flight requests and leftovers cross the end of the agent phase.

The agent leaves files in /tmp, /var/tmp and /dev/shm and a SysV shared memory
segment, plants late_hook.py in pyarchive, starts a build through the bencher
without waiting for it, and exits as soon as the build (as sse-runner) has sent
the headers of a bash request whose body it completes after the phase.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
from pathlib import Path

import ssehostile as h

SIGNALS = Path("/tmp/h6sig")
KEY = 0x5EB06
IPC_CREAT = 0o1000


def leave_things() -> dict[str, object]:
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        Path(folder, "hole6-model-file").write_text("left by the agent\n")
    libc = ctypes.CDLL(None, use_errno=True)
    segment = libc.shmget(KEY, 4096, IPC_CREAT | 0o644)
    return {"shm segment": segment, "shm errno": ctypes.get_errno()}


def main() -> None:
    found = leave_things()
    h.task_side_mkdir(str(SIGNALS))
    shutil.copy("/opt/agent/late_hook.py", "pyarchive/_integrity_late.py")
    with Path("pyarchive/__init__.py").open("a") as init:
        init.write("\nfrom pyarchive import _integrity_late  # noqa: E402,F401\n")
    threading.Thread(target=h.bencher, args=("build",), daemon=True).start()
    sent = str(SIGNALS / "headers-sent")
    found["headers sent"] = h.wait_for(lambda: h.task_side_exists(sent), 60, step=0.2)
    h.write_report(found)
    print("late-request: leaving now", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
