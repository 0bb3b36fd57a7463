"""What every hostile agent of the integrity suite shares: talking to the daemon as a
client would, trying a file, finding a user's processes, writing the report.

The suite copies this file into each agent folder (tests/integrity/conftest.py),
so it is imported from /opt/agent in the container. It runs under the case
image's python3 or, where the image has none, the SSEBench runtime's Python
(readable by everyone); it needs nothing but the standard library.
"""

from __future__ import annotations

import errno
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ARCHIVE = Path(os.environ.get("SSE_ARCHIVE") or "/tmp/sse-archive")
SANDBOX_SOCKET = "/tmp/sse.sock"
SIDECAR_SOCKET = "/run/ssebench/sse.sock"
AGENT_SOCKET = os.environ.get("SSE_DAEMON_SOCKET") or (
    SANDBOX_SOCKET if Path(SANDBOX_SOCKET).exists() else SIDECAR_SOCKET
)
"""The agent-facing socket: the agent is told; code planted in a check (run as sse-runner,
told nothing) finds it at the sandbox path or, in a sidecar task container, on the volume."""
SIDECAR = AGENT_SOCKET == SIDECAR_SOCKET
"""Sidecar mode: the agent's container is not the task container, where checks (and what
the agent plants in them) run; the two share only the source tree and the daemon."""
ADMIN_SOCKET = "/run/ssebench/admin.sock"
DAEMON_PORT = 4263
DIFFICULTY = int(os.environ.get("SSE_DIFFICULTY") or "2")
ACTIONS = ("build", "run_poc", "function_test", "intent_test")
PYTHON = sys.executable


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def call(
    method: str,
    path: str,
    body: object | None = None,
    *,
    via: str = AGENT_SOCKET,
    timeout: float = 900,
) -> dict[str, Any]:
    """One request: `via` is a socket path or `host:port`.

    Returns:
        {"status": int | None, "body": JSON or text, "error": str | None}.
    """
    try:
        if via.startswith("/"):
            conn: http.client.HTTPConnection = _Unix(via, timeout)
        else:
            host, _, port = via.rpartition(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        raw = reply.read().decode("utf-8", "replace")
        conn.close()
    except OSError as exc:
        return {"status": None, "body": None, "error": describe(exc)}
    try:
        parsed: Any = json.loads(raw)
    except ValueError:
        parsed = raw
    return {"status": reply.status, "body": parsed, "error": None}


def bash(command: str, *, via: str = AGENT_SOCKET, timeout: float = 900) -> dict[str, Any]:
    """The daemon's bash tool: one command in its persistent shell."""
    body = {"command": command}
    return call("POST", "/tool/bash?action=execute", body, via=via, timeout=timeout)


def bencher(action: str, *, via: str = AGENT_SOCKET, **body: object) -> dict[str, Any]:
    """One check through the daemon (its answer as `call` gives it)."""
    return call("POST", f"/tool/bencher?action={action}", body, via=via)


def describe(exc: BaseException) -> str:
    """`denied`, `missing`, `unreachable`, … for the errors the suite expects; else the error."""
    if isinstance(exc, PermissionError):
        return "denied"
    if isinstance(exc, FileNotFoundError):
        return "missing"
    if isinstance(exc, OSError) and exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return "unreachable"
    if isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED:
        return "refused"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timeout"
    return f"{type(exc).__name__}: {exc}"


def try_read(path: str) -> str:
    """Read a file or list a folder: `READ <n> bytes` / `LISTED …`, or why not."""
    try:
        if Path(path).is_dir():
            return f"LISTED {sorted(entry.name for entry in Path(path).iterdir())[:20]}"
        return f"READ {len(Path(path).read_bytes())} bytes"
    except OSError as exc:
        return describe(exc)


def try_connect_unix(path: str) -> str:
    """Connect to a Unix socket: `CONNECTED`, or why not."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5)
        sock.connect(path)
        return "CONNECTED"
    except OSError as exc:
        return describe(exc)
    finally:
        sock.close()


def try_connect_tcp(address: str, timeout: float = 3) -> str:
    """Open a TCP connection and read the answer: `REACHED <answer>`, or why not."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return "REACHED " + sock.recv(200).decode("utf-8", "replace")
    except OSError as exc:
        return describe(exc)


def fetch(address: str, path: str, timeout: float = 10) -> str | None:
    """The body a plain HTTP server at `address` answers for `path` (None: no answer)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
    except OSError:
        return None
    return answer.partition(b"\r\n\r\n")[2].decode("utf-8", "replace")


def attempt(action: Any) -> str:
    """Run one filesystem action: `DONE`, or why it failed."""
    try:
        action()
        return "DONE"
    except OSError as exc:
        return describe(exc)


def processes_of(uid: int) -> list[str]:
    """`pid command` of every live process whose real or effective uid is `uid`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            status = Path(entry.path, "status").read_text()
            command = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("State", "").split()[:1] in (["Z"], ["X"]):
            continue
        if str(uid) in fields.get("Uid", "").split()[:2]:
            found.append(f"{entry.name} {command.decode('utf-8', 'replace').strip()[:120]}")
    return found


def uid_of(name: str) -> int | None:
    """A user's uid from /etc/passwd (None when there is no such user)."""
    for line in Path("/etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if len(fields) > 2 and fields[0] == name:
            return int(fields[2])
    return None


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """A command's status and output (never raises for a failing command)."""
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)


def commit_all(message: str) -> None:
    """Commit the whole tree as the agent (its own identity, no hooks)."""
    run(["git", "add", "-A"])
    run(
        [
            "git",
            "-c",
            "user.name=Hostile agent",
            "-c",
            "user.email=hostile@ssebench.invalid",
            "commit",
            "-q",
            "--no-verify",
            "-m",
            message,
        ]
    )


def task_side_mkdir(path: str) -> None:
    """A folder everyone may write, where checks run: here, or (sidecar) through the
    daemon's bash tool in the task container."""
    if SIDECAR:
        bash(f"mkdir -m 0777 {path} && chmod 0777 {path}")
    else:
        Path(path).mkdir()
        Path(path).chmod(0o777)


def task_side_exists(path: str) -> bool:
    """Whether `path` exists where checks run (see `task_side_mkdir`)."""
    if SIDECAR:
        answer = bash(f"test -e {path} && echo yes")
        return (answer.get("body") or {}).get("stdout") == "yes\n"
    return Path(path).exists()


def write_report(data: object, name: str = "report.json") -> None:
    """The agent's findings, for the test to read in the host's archive/."""
    ARCHIVE.mkdir(parents=True, exist_ok=True)
    (ARCHIVE / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def wait_for(predicate: Any, seconds: float, step: float = 0.05) -> bool:
    """Poll until `predicate()` is true or `seconds` passed; whether it became true."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())
