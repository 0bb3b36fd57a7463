"""The hostile agent of test_bypass.py.

As `model`, it tries every known way around the protections: reading the
protected files directly and through the daemon's bash tool, reaching the admin
socket, moving and replacing the agent-facing socket, running checks its
difficulty withholds, reading the reference patch and the admin routes, reaching
the internet stand-in. Every attempt's outcome goes into $SSE_ARCHIVE/report.json.
It changes nothing in the project.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import ssehostile as h

STANDIN = "198.18.9.2:8099"
HOST_SIDE = "198.18.9.1:8099"
HTTP = f"127.0.0.1:{h.DAEMON_PORT}"

PROTECTED = [
    "/ssebench",
    "/ssebench/config.yaml",
    "/ssebench/scripts/run.sh",
    "/ssebench/diffs",
    "/ssebench/diffs/patch.diff",
    "/ssebench/diffs/test.diff",
    "/ssebench/pocs",
    "/ssebench/pocs/dotdot-escape.zip",
    "/ssebench/pocs/sibling-prefix-escape.zip",
    "/ssebench/pocs/truncated-long-length.bin",
    "/ssebench/pocs/nested-truncated-long-length.bin",
    "/ssebench-repo",
    "/ssebench-repo/.git/HEAD",
    "/var/lib/ssebench",
    "/var/lib/ssebench/results",
    "/var/lib/ssebench/results/result.json",
    "/var/lib/ssebench/results/final.patch",
    "/var/lib/ssebench-runner",
    "/run/ssebench",
    "/proc/1/environ",
    "/reference/patch.diff",
]
"""Files and folders the agent must not read (the reference patch is mounted for the
reference agent only)."""

CONNECT = (
    "import socket, sys\nsocket.socket(socket.AF_UNIX).connect(sys.argv[1])\nprint('CONNECTED')\n"
)


def identity() -> dict[str, object]:
    status = Path("/proc/self/status").read_text().splitlines()
    groups = next((line for line in status if line.startswith("Groups:")), "Groups:")
    shown = h.bash("id -u; id -g; id -G")
    return {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "status_groups": groups.split(":", 1)[1].split(),
        "bash_tool_ids": (shown.get("body") or {}).get("stdout"),
    }


def direct_reads() -> dict[str, str]:
    found = {path: h.try_read(path) for path in PROTECTED}
    found["connect " + h.ADMIN_SOCKET] = h.try_connect_unix(h.ADMIN_SOCKET)
    return found


def bash_reads() -> dict[str, object]:
    found: dict[str, object] = {}
    for path in PROTECTED:
        found[path] = h.bash(f"cat {path} 2>&1 || ls -la {path}/ 2>&1")
    script = Path(f"/tmp/integ-connect-{os.getpid()}.py")
    script.write_text(CONNECT)
    found["connect " + h.ADMIN_SOCKET] = h.bash(f"{h.PYTHON} {script} {h.ADMIN_SOCKET} 2>&1")
    return found


def admin_routes() -> dict[str, object]:
    found: dict[str, object] = {}
    for via in (h.AGENT_SOCKET, HTTP):
        found[f"{via} GET /reference/patch"] = h.call("GET", "/reference/patch", via=via)
        found[f"{via} POST /prepare_grading"] = h.call("POST", "/prepare_grading", {}, via=via)
        found[f"{via} POST /admin/agent_exited"] = h.call(
            "POST", "/admin/agent_exited", {}, via=via
        )
        found[f"{via} POST grading build"] = h.bencher("build", via=via, grading=True)
    return found


def checks() -> dict[str, object]:
    """Every action once on the socket; those the daemon says are withheld also over HTTP."""
    capabilities = h.call("GET", "/capabilities").get("body") or {}
    says = {
        "build": capabilities.get("can_build"),
        "run_poc": capabilities.get("can_run_poc"),
        "function_test": capabilities.get("has_function_test"),
        "intent_test": capabilities.get("has_intent_test"),
    }
    found: dict[str, object] = {"capabilities": capabilities}
    for action in h.ACTIONS:
        found[f"socket {action}"] = h.bencher(action, poc=0)["status"]
        if not says[action]:
            found[f"http {action}"] = h.bencher(action, via=HTTP, poc=0)["status"]
    return found


def bind_at(path: str) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(1)


def sockets() -> dict[str, object]:
    target = h.AGENT_SOCKET
    own = f"/tmp/integ-own-{os.getpid()}.sock"
    bind_at(own)
    found: dict[str, object] = {
        "rename": h.attempt(lambda: Path(target).rename(target + ".moved")),
        "unlink": h.attempt(lambda: Path(target).unlink()),
        "replace": h.attempt(lambda: Path(own).rename(target)),
        "bind over": h.attempt(lambda: bind_at(target)),
        "link over": h.attempt(lambda: Path(target).symlink_to(own)),
        "admin rename": h.attempt(lambda: Path(h.ADMIN_SOCKET).rename(h.ADMIN_SOCKET + ".moved")),
        "bash tool": h.bash(f"mv {target} {target}.bash 2>&1; rm -f {target} 2>&1; ls -l {target}"),
    }
    info = os.lstat(target)
    found["after"] = {
        "uid": info.st_uid,
        "is_socket": (info.st_mode & 0o170000) == 0o140000,
        "version": h.call("GET", "/version")["status"],
    }
    return found


def network() -> dict[str, str]:
    found = {address: h.try_connect_tcp(address) for address in (STANDIN, HOST_SIDE)}
    via_bash = h.bash(
        f"{h.PYTHON} -c 'import socket; socket.create_connection((\"198.18.9.2\", 8099), 3)'"
        " 2>&1 && echo REACHED"
    )
    found["bash tool " + STANDIN] = str((via_bash.get("body") or {}).get("stdout"))
    return found


def main() -> None:
    report = {
        "identity": identity(),
        "direct": direct_reads(),
        "via_bash": bash_reads(),
        "admin_routes": admin_routes(),
        "checks": checks(),
        "sockets": sockets(),
        "network": network(),
    }
    h.write_report(report)
    print("bypass agent: report written")


if __name__ == "__main__":
    main()
