"""The end of the agent phase in a real tool-image container (hole 6 of issue 13).

Rule (docs/integrity.md): no code of the agent runs after the agent phase except
inside a check, as sse-runner, and what the agent left in shared writable
places is gone before grading.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from .boxes import ADMIN_SOCKET, AGENT_SOCKET, PYTHON, Answer, Box, Via, bash, bencher, post
from .conftest import StartBox

pytestmark = pytest.mark.docker

TASK = "pyarchive-path-traversal"

SLOW_CLIENT = r"""
import json, socket, sys
body = sys.argv[2].encode()
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
sock.sendall(
    f"POST {sys.argv[3]} HTTP/1.1\r\nHost: daemon\r\nContent-Type: application/json\r\n"
    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
)
print("sent", flush=True)
sys.stdin.readline()
sock.sendall(body)
data = b""
while chunk := sock.recv(65536):
    data += chunk
print(data.split(b"\r\n\r\n", 1)[1].decode())
"""


def slow_request(box: Box, path: str, body: str) -> subprocess.Popen[str]:
    """A request on the agent socket (sent by root, who outlives model) whose body waits for
    a line on stdin."""
    client = subprocess.Popen(
        ["docker", "exec", "-i", "--user", "root", box.name,
         PYTHON, "-I", "-c", SLOW_CLIENT, AGENT_SOCKET, body, path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert client.stdout is not None
    assert client.stdout.readline() == "sent\n"
    return client


def test_a_tool_call_whose_body_arrives_after_agent_exited_is_refused(
    daemon_in: StartBox,
) -> None:
    box = daemon_in(TASK, SSE_DIFFICULTY="0")
    command = '{"command": "touch /src/pyarchive/ran-after-the-phase"}'
    clients = [
        slow_request(box, "/tool/bash?action=execute", command),
        slow_request(box, "/tool/bencher?action=build", "{}"),
    ]
    time.sleep(1)  # the headers have passed the gate
    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True
    for client in clients:
        out, _ = client.communicate("go\n", timeout=120)
        assert '"code":"agent_phase_over"' in out, out
    assert box.sh("test -e /src/pyarchive/ran-after-the-phase").returncode != 0
    assert box.out("ls /var/lib/ssebench/results") == ""  # no check began


HANG = (
    "import os, time\n"
    "if os.fork() == 0:\n    os.setsid()\n    time.sleep(100000)\n"
    "time.sleep(100000)\n"
)


def test_a_check_running_at_agent_exited_is_stopped_with_every_process(
    daemon_in: StartBox,
) -> None:
    box = daemon_in(TASK, SSE_DIFFICULTY="0")
    box.ok(bash("agent", f"cat >> pyarchive/__init__.py <<'SSE_END'\n{HANG}SSE_END"))
    answers: list[Answer] = []
    running = threading.Thread(
        target=lambda: answers.append(box.one(bencher("agent", "build"), user="root"))
    )
    running.start()
    deadline = time.monotonic() + 120
    while len(box.processes("sse-runner")) < 2:
        assert time.monotonic() < deadline, "the build never started"
        time.sleep(0.2)

    started = time.monotonic()
    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True
    assert time.monotonic() - started < 30
    assert box.processes("sse-runner") == []  # already when agent_exited answers
    running.join(60)
    assert (answers[0].status, answers[0].code) == (403, "agent_phase_over"), answers
    assert box.out("ls /var/lib/ssebench-runner") == ""
    # Grading still works afterwards.
    assert box.ok(post("admin", "/prepare_grading"))["success"] is True


MODEL_LEAVES = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget(0, 4096, 0o1600), libc.msgget(0, 0o1600), libc.semget(0, 1, 0o1600))
queue = libc.mq_open(b"/agent-queue", os.O_CREAT | os.O_RDWR, 0o600, None)
print("mqueue", queue)
"""


def test_the_shell_and_models_leftovers_do_not_outlive_the_agent_phase(
    daemon_in: StartBox,
) -> None:
    box = daemon_in(TASK, SSE_DIFFICULTY="2")
    leaves = (
        "mkdir /tmp/agent-dir && echo x > /tmp/agent-dir/x && echo y > /tmp/agent-file && "
        "echo z > /dev/shm/agent-shm && echo w > /var/tmp/agent-var && "
        "echo v > /run/lock/agent-lock && echo '{}' > /tmp/sse-archive/dialog.jsonl"
    )
    assert box.ok(bash("agent", leaves))["code"] == 0
    made = box.sh(f"python3 -c '{MODEL_LEAVES}'", user="model")
    assert made.returncode == 0, made.stderr
    assert "-1" not in made.stdout.decode().split(), made.stdout
    assert box.out("ls /dev/mqueue") == "agent-queue\n"
    uid = box.out("id -u model").strip()
    owned = "tail -q -n +2 /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem"
    assert len([row for row in box.out(owned).splitlines() if uid in row.split()]) == 3
    assert box.ok(bash("agent", "echo alive"))["stdout"] == "alive\n"

    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True

    for path in (
        "/tmp/agent-dir",
        "/tmp/agent-file",
        "/dev/shm/agent-shm",
        "/var/tmp/agent-var",
        "/run/lock/agent-lock",
        "/dev/mqueue/agent-queue",
    ):
        assert box.sh(f"test -e {path}").returncode != 0, path
    assert [row for row in box.out(owned).splitlines() if uid in row.split()] == []
    # The archive, the agent's tree and the daemon's sockets stay.
    assert box.out("cat /tmp/sse-archive/dialog.jsonl") == "{}\n"
    assert box.sh("test -d /src/pyarchive/pyarchive").returncode == 0
    assert box.out(f"stat -c %F {AGENT_SOCKET} {ADMIN_SOCKET}") == "socket\nsocket\n"
    # The shell does not come back, on any listener.
    listeners: tuple[Via, ...] = ("agent", "http", "admin")
    for via in listeners:
        answer = box.one(bash(via, "echo again"), user="root")
        assert (answer.status, answer.code) == (403, "agent_phase_over"), (via, answer)
    assert box.processes("model") == []
