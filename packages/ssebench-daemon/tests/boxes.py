"""The daemon in a real tool-image container, and clients acting as the agent or as root.

The daemon runs as root (the container's command, under `--init`); the agent
is `docker exec --user model`, the privileged side `docker exec --user root`.
Requests go through a small client run with the runtime's Python inside the
container, many per `docker exec`.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ssebench.spec import contract

PYTHON = contract.RUNTIME_PYTHON
AGENT_SOCKET = contract.SANDBOX_DAEMON_SOCKET
ADMIN_SOCKET = contract.ADMIN_SOCKET
LABEL = "ssebench-test.daemon"

Via = Literal["agent", "http", "admin"]
User = Literal["model", "root", "sse-runner"]

CLIENT = r"""
import http.client, json, socket, sys

class Unix(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)

answers = []
for item in json.load(sys.stdin):
    try:
        if item["via"] == "http":
            conn = http.client.HTTPConnection("127.0.0.1", DAEMON_PORT, timeout=item["timeout"])
        else:
            conn = Unix(item["via"], item["timeout"])
        body = item["body"]
        data = None if body is None else body.encode("utf-8", "surrogateescape")
        headers = {"Content-Type": "application/json"}
        conn.request(item["method"], item["path"], body=data, headers=headers)
        reply = conn.getresponse()
        answers.append({"status": reply.status, "body": reply.read().decode("utf-8", "replace")})
        conn.close()
    except OSError as exc:
        answers.append({"status": None, "body": "", "error": type(exc).__name__ + ": " + str(exc)})
json.dump(answers, sys.stdout)
""".replace("DAEMON_PORT", str(contract.DAEMON_PORT))


@dataclass(frozen=True)
class Request:
    """One HTTP request to one listener."""

    via: Via
    method: str
    path: str
    body: str | None = None
    timeout: float = 900

    def wire(self) -> dict[str, Any]:
        target = {"agent": AGENT_SOCKET, "admin": ADMIN_SOCKET, "http": "http"}[self.via]
        return {
            "via": target,
            "method": self.method,
            "path": self.path,
            "body": self.body,
            "timeout": self.timeout,
        }


@dataclass(frozen=True)
class Answer:
    """A listener's answer (status None: the connection itself failed, `error` says how)."""

    status: int | None
    body: str
    error: str | None = None

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def code(self) -> str | None:
        """The error code of an error answer."""
        return str(self.json().get("code")) if self.status and self.status >= 400 else None


def get(via: Via, path: str) -> Request:
    return Request(via, "GET", path)


def post(via: Via, path: str, body: object | None = None, *, raw: str | None = None) -> Request:
    return Request(via, "POST", path, raw if raw is not None else json.dumps(body or {}))


def bash(via: Via, command: str, **extra: object) -> Request:
    return post(via, "/tool/bash?action=execute", {"command": command, **extra})


def bencher(via: Via, action: str, **body: object) -> Request:
    return post(via, f"/tool/bencher?action={action}", body)


@dataclass
class Box:
    """One container of a tool image with the daemon running in it."""

    name: str
    image: str
    env: dict[str, str] = field(default_factory=dict)

    def exec(
        self,
        argv: Sequence[str],
        *,
        user: User = "root",
        stdin: str | bytes | None = None,
        timeout: float = 900,
        check: bool = False,
    ) -> subprocess.CompletedProcess[bytes]:
        """`docker exec --user <user>` (no environment of ours goes in)."""
        data = stdin.encode() if isinstance(stdin, str) else stdin
        return subprocess.run(
            [
                "docker",
                "exec",
                *(["-i"] if data is not None else []),
                "--user",
                user,
                self.name,
                *argv,
            ],
            input=data,
            capture_output=True,
            timeout=timeout,
            check=check,
        )

    def sh(
        self, script: str, *, user: User = "root", timeout: float = 900
    ) -> subprocess.CompletedProcess[bytes]:
        """A bash script run with `docker exec --user <user>`."""
        return self.exec(["bash", "-c", script], user=user, timeout=timeout)

    def out(self, script: str, *, user: User = "root") -> str:
        """A script's stdout; it must succeed."""
        done = self.sh(script, user=user)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout.decode(errors="replace")

    def send(self, requests: Sequence[Request], *, user: User | None = None) -> list[Answer]:
        """Send requests in order from inside the container (as root for the admin socket,
        else as `model`, unless `user` says otherwise)."""
        if user is None:
            user = "root" if all(r.via == "admin" for r in requests) else "model"
        payload = json.dumps([r.wire() for r in requests])
        done = self.exec([PYTHON, "-I", "-c", CLIENT], user=user, stdin=payload)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return [Answer(**item) for item in json.loads(done.stdout)]

    def one(self, request: Request, *, user: User | None = None) -> Answer:
        return self.send([request], user=user)[0]

    def ok(self, request: Request, *, user: User | None = None) -> Any:
        """The JSON of a 200 answer."""
        answer = self.one(request, user=user)
        assert answer.status == 200, (request.path, answer)
        return answer.json()

    def processes(self, user: str) -> list[str]:
        """`ps`-like lines (pid, state, command) of a user's live processes, read from /proc."""
        script = (
            "import os, pwd\n"
            f"uid = pwd.getpwnam({user!r}).pw_uid\n"
            "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try:\n"
            "        status = open(f'/proc/{pid}/status').read()\n"
            "        cmd = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
            "        cmd = cmd.replace(b'\\0', b' ').decode()\n"
            "    except OSError:\n"
            "        continue\n"
            "    fields = dict(l.split(':', 1) for l in status.splitlines() if ':' in l)\n"
            "    state = fields['State'].split()[0]\n"
            "    if state != 'Z' and str(uid) in fields['Uid'].split():\n"
            "        print(pid, state, cmd)\n"
        )
        done = self.exec([PYTHON, "-I", "-c", script])
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout.decode().splitlines()

    def logs(self) -> str:
        done = subprocess.run(["docker", "logs", self.name], capture_output=True, timeout=60)
        return (done.stdout + done.stderr).decode(errors="replace")

    def remove(self) -> None:
        subprocess.run(["docker", "rm", "-f", "-v", self.name], capture_output=True, timeout=120)


def start_box(image: str, **env: str) -> Box:
    """Run the daemon as root in a new container of `image` and wait until it serves.

    Raises:
        AssertionError: the daemon did not come up; the message holds its log.
    """
    box = Box(name=f"ssebench-test-daemon-{uuid.uuid4().hex[:12]}", image=image, env=dict(env))
    env_args = [arg for name, value in env.items() for arg in ("-e", f"{name}={value}")]
    subprocess.run(
        ["docker", "run", "-d", "--init", "--network", "none", "--label", f"{LABEL}=1",
         "--name", box.name, *env_args, "--entrypoint", PYTHON, image,
         "-I", "-m", "ssebench.daemon"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = box.exec(["test", "-S", ADMIN_SOCKET])
        if done.returncode == 0 and box.one(get("admin", "/version")).status == 200:
            return box
        state = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Running}}", box.name],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if state.stdout.strip() != "true":
            break
        time.sleep(0.2)
    log = box.logs()
    box.remove()
    raise AssertionError(f"the daemon did not start in {image}:\n{log}")
