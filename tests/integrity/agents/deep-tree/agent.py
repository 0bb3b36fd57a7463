"""Hole 3 of issue 13 (deep trees): a file 1400 folders deep in the agent's tree, and a
build that leaves one in /tmp. Root's recursive copies and clean-ups meet them; the
grade must still say something about the patch (`failed` here), never `error`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import ssehostile as h

DEPTH = 1400


def main() -> None:
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEPTH):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    with os.fdopen(os.open("deep.txt", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd), "w") as deep:
        deep.write("1400 folders down\n")
    shutil.copy("/opt/agent/deep_hook.py", "pyarchive/_integrity_deep.py")
    with Path("pyarchive/__init__.py").open("a") as init:
        init.write("\nfrom pyarchive import _integrity_deep  # noqa: E402,F401\n")
    h.write_report({"depth": DEPTH})
    print("deep-tree: planted")


if __name__ == "__main__":
    main()
