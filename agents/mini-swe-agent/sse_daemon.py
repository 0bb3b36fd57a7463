"""SSEBench's daemon from mini-swe-agent's side: standard library only (no litellm import).

`python -m sse_daemon task` prints the task for `mini -t`: what the daemon's
`GET /project` says (the description, the crash reports, the build and test
scripts), read over `$SSE_DAEMON_SOCKET`. `daemon()` is one request to that socket.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
from typing import Any


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def daemon(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One request to the daemon's agent-facing socket; the JSON answer (raises on non-200)."""
    connection = _UnixConnection(os.environ["SSE_DAEMON_SOCKET"], timeout=None)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        connection.request(method, path, body=data, headers=headers)
        answer = connection.getresponse()
        payload = answer.read()
    finally:
        connection.close()
    if answer.status != 200:
        raise RuntimeError(f"daemon {method} {path}: {answer.status} {payload[:300]!r}")
    return json.loads(payload)


def task_text() -> str:
    """The task as mini-swe-agent's `-t` takes it, from `GET /project`."""
    project = daemon("GET", "/project")
    described = project["task_description"]
    parts = [
        f"Fix a security vulnerability in {project['project']} ({project['language']}), "
        f"whose source tree is {project['source']} (the current directory).",
    ]
    if described.get("issue"):
        parts.append("Issue:\n" + described["issue"])
    if described.get("bug_description"):
        parts.append("Bug:\n" + described["bug_description"])
    parts += [f"Crash report:\n{report}" for report in described.get("crash_report") or []]
    for name in ("build", "test"):
        script = (project.get("scripts") or {}).get(name)
        if script:
            parts.append(f"The project's {name} script (run it from the tree):\n{script}")
    return "\n\n".join(parts)


if __name__ == "__main__":
    if sys.argv[1:] != ["task"]:
        sys.exit("usage: python -m sse_daemon task")
    print(task_text())
