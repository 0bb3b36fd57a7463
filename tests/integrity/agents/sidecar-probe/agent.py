"""The agent of test_sidecar.py: what `model` finds of a sidecar pair's walls.

From the agent container, and through the daemon's bash tool in the task
container, it looks for the task's files, reaches for the admin socket, tries to
move the sockets and create files next to them, reads the results directory,
runs every check, and connects to the internet stand-in and the host. Every
outcome goes into $SSE_ARCHIVE/report.json. It changes nothing in the project.
"""

from __future__ import annotations

import os
from pathlib import Path

import ssehostile as h

STANDIN = "198.18.9.2:8099"
HOST_SIDE = "198.18.9.1:8099"
SOCKET_DIR = "/run/ssebench"
RESULTS = "/var/lib/ssebench/results"
TASK_PATHS = ("/ssebench", "/ssebench-repo")

CONNECT = "import socket, sys\nsocket.create_connection((sys.argv[1], int(sys.argv[2])), 3)\n"


def here() -> dict[str, object]:
    """The agent container, as model."""
    # Renamed within the volume: a rename to /tmp would fail for the wrong reason (EXDEV).
    moved = Path(SOCKET_DIR, "moved.sock")
    return {
        "uid": os.getuid(),
        "exists": {path: os.path.lexists(path) for path in TASK_PATHS},
        "admin": h.try_connect_unix(h.ADMIN_SOCKET),
        "agent socket": h.try_connect_unix(h.AGENT_SOCKET),
        "results": h.try_read(RESULTS),
        "results parent": h.try_read(str(Path(RESULTS).parent)),
        "sockets": {
            "create": h.attempt(lambda: Path(SOCKET_DIR, "planted").write_text("x")),
            "mkdir": h.attempt(lambda: Path(SOCKET_DIR, "planted.d").mkdir()),
            "rename agent": h.attempt(lambda: Path(h.AGENT_SOCKET).rename(moved)),
            "unlink agent": h.attempt(lambda: Path(h.AGENT_SOCKET).unlink()),
            "rename admin": h.attempt(lambda: Path(h.ADMIN_SOCKET).rename(moved)),
            "unlink admin": h.attempt(lambda: Path(h.ADMIN_SOCKET).unlink()),
            "chmod dir": h.attempt(lambda: Path(SOCKET_DIR).chmod(0o777)),
        },
        "socket dir": oct(Path(SOCKET_DIR).stat().st_mode & 0o7777),
        "socket dir owner": Path(SOCKET_DIR).stat().st_uid,
        "network": {address: h.try_connect_tcp(address) for address in (STANDIN, HOST_SIDE)},
        "process uids": sorted({uid for uid in map(_owner, Path("/proc").iterdir()) if uid >= 0}),
        "results mounted": RESULTS in _mount_points(),
    }


def _mount_points() -> set[str]:
    return {line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()}


def _owner(entry: Path) -> int:
    """The uid of a process in /proc (-1 for what is not a process, or ended)."""
    if not entry.name.isdigit():
        return -1
    try:
        return entry.stat().st_uid
    except OSError:
        return -1


def there() -> dict[str, object]:
    """The task container, through the daemon's bash tool (it runs as model there)."""
    found: dict[str, object] = {}
    commands = {
        "ids": "id -u; id -g",
        "task paths": "for p in /ssebench /ssebench-repo; do test -e $p && echo $p; done",
        "results": f"ls {RESULTS} 2>&1; echo status=$?",
        "sockets": f"touch {SOCKET_DIR}/planted 2>&1; mv {h.ADMIN_SOCKET} /tmp/x 2>&1; echo done",
    }
    for name, command in commands.items():
        answer = h.bash(command)
        found[name] = (
            (answer.get("body") or {}).get("stdout") if answer["status"] == 200 else answer
        )
    for address in (STANDIN, HOST_SIDE):
        host, _, port = address.rpartition(":")
        # The task container has no file of this agent: the script goes in the command.
        answer = h.bash(
            f"{h.PYTHON} -c {quote(CONNECT)} {host} {port} 2>&1 && echo REACHED || echo FAILED"
        )
        found[f"network {address}"] = (answer.get("body") or {}).get("stdout")
    return found


def quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def checks() -> dict[str, object]:
    return {action: h.bencher(action, poc=0)["status"] for action in h.ACTIONS}


def main() -> None:
    h.write_report({"here": here(), "there": there(), "checks": checks()})
    print("sidecar-probe agent: report written")


if __name__ == "__main__":
    main()
