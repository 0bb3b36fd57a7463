"""The end of the agent phase against requests in flight, over the real wire (fake privileges).

Rule (docs/integrity.md): no code of the agent runs after the agent phase except inside
a check, as sse-runner — so a request whose body arrives after the phase ended,
a check whose turn comes after it, a check running at that moment and the bash
shell all stop there.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from .conftest import Running
from .fakes import TAG, tagged, write_script

pytestmark = pytest.mark.process


def send_headers(path: Path, target: str, body: bytes) -> socket.socket:
    """Open a request on a Unix socket and send everything but its body."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(60)
    sock.connect(str(path))
    head = (
        f"POST {target} HTTP/1.1\r\nHost: daemon\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    sock.sendall(head.encode())
    return sock


def finish(sock: socket.socket, body: bytes) -> tuple[int, dict[str, object]]:
    """Send the body and read the whole answer: (status, JSON)."""
    sock.sendall(body)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    head, _, payload = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    return status, json.loads(payload)


def test_a_tool_call_whose_body_arrives_after_the_phase_ended_is_refused(running: Running) -> None:
    body = json.dumps({"command": "touch ran-after-the-phase"}).encode()
    pending_bash = send_headers(running.config.agent_socket, "/tool/bash?action=execute", body)
    pending_check = send_headers(running.config.agent_socket, "/tool/bencher?action=build", b"{}")
    time.sleep(0.5)  # the headers have passed the gate
    assert running.admin.post("/admin/agent_exited").status_code == 200

    status, answer = finish(pending_bash, body)
    assert (status, answer["code"]) == (403, "agent_phase_over"), answer
    status, answer = finish(pending_check, b"{}")
    assert (status, answer["code"]) == (403, "agent_phase_over"), answer
    assert not (running.daemon.source / "ran-after-the-phase").exists()
    assert not list(running.config.results_dir.glob("check-*"))  # no check began


HANGING_BUILD = """\
#!/bin/bash
setsid sleep 1000 < /dev/null > /dev/null 2>&1 &
touch "{marker}"
sleep 1000
"""


def test_a_check_running_when_the_phase_ends_is_stopped_and_one_waiting_never_runs(
    running: Running, tmp_path: Path
) -> None:
    marker = tmp_path / "build-started"
    write_script(
        running.config.task_dir / "scripts" / "build.sh", HANGING_BUILD.format(marker=marker)
    )
    answers: dict[str, httpx.Response] = {}

    def ask(name: str, client: httpx.Client) -> None:
        answers[name] = client.post("/tool/bencher", params={"action": "build"}, json={})

    first = threading.Thread(target=ask, args=("running", running.agent))
    first.start()
    for _ in range(300):
        if marker.exists():
            break
        time.sleep(0.05)
    assert marker.exists()
    second = threading.Thread(target=ask, args=("waiting", running.http))
    second.start()
    time.sleep(0.5)  # the second request waits for the check lock

    started = time.monotonic()
    assert running.admin.post("/admin/agent_exited").status_code == 200
    assert time.monotonic() - started < 20
    # When agent_exited returns, nothing of the check is left running.
    assert tagged(running.privileges.extra_env[TAG]) == []
    assert not list(running.config.scratch_dir.iterdir())
    first.join(30)
    second.join(30)
    for name in ("running", "waiting"):
        answer = answers[name]
        assert (answer.status_code, answer.json()["code"]) == (403, "agent_phase_over"), name
    assert "agent phase is over" in answers["running"].json()["error"]
    logs = sorted(path.name for path in running.config.results_dir.glob("check-*"))
    assert logs == ["check-0001-build.log"]  # the waiting one never began


def test_the_shell_stops_with_the_phase_and_never_starts_again(running: Running) -> None:
    answers: list[httpx.Response] = []
    pending = threading.Thread(
        target=lambda: answers.append(
            running.agent.post("/tool/bash", json={"command": "sleep 1000"})
        )
    )
    pending.start()
    time.sleep(0.5)
    assert running.admin.post("/admin/agent_exited").status_code == 200
    pending.join(30)
    assert (answers[0].status_code, answers[0].json()["code"]) == (403, "agent_phase_over")
    assert running.daemon.shell.pid is None
    for client in (running.admin, running.agent):
        refused = client.post("/tool/bash", json={"command": "echo again"})
        assert (refused.status_code, refused.json()["code"]) == (403, "agent_phase_over")
    assert running.daemon.shell.pid is None
    assert tagged(running.privileges.extra_env[TAG]) == []


def test_the_archive_and_the_source_tree_are_closed_to_others_when_the_phase_ends(
    running: Running,
) -> None:
    archive, source = running.config.archive_dir, running.daemon.source
    archive.chmod(0o777)
    (archive / "drop").mkdir(mode=0o777)
    source.chmod(0o777)
    assert running.admin.post("/admin/agent_exited").status_code == 200
    info = archive.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (
        0,
        running.privileges.model.gid,
        0o750,
    )
    assert source.stat().st_mode & 0o7777 == 0o750
    assert source.stat().st_uid == running.privileges.model.uid
    # The dialog is still read as model.
    (archive / "dialog.jsonl").write_text('{"n": 1}\n')
    assert running.agent.get("/agent/dialog").json() == {"entries": [{"n": 1}], "next": 1}


def test_the_backends_report_of_the_agents_end_reaches_the_entrypoint_once(
    start_daemon: Callable[..., Running],
) -> None:
    read_end, write_end = os.pipe()
    running = start_daemon(report_fd=write_end)
    assert running.admin.post("/admin/agent_exited", json={"exit_code": 3}).status_code == 200
    assert running.admin.post("/admin/agent_exited", json={"exit_code": 9}).status_code == 200
    # The daemon wrote the first report, then closed its end: the pipe ends there.
    with os.fdopen(read_end, "rb") as pipe:
        assert pipe.read() == b'{"exit_code":3}\n'
    refused = running.agent.post("/admin/agent_exited", json={"exit_code": 0})
    assert refused.status_code == 403
    # A report ends nothing: the entrypoint runs the after-agent plugins (as model, into
    # the archive) first, then ends the phase with the route, without a status.
    assert running.agent.post("/tool/bash", json={"command": "echo open"}).status_code == 200
    assert not running.daemon.agent_phase_over
    assert running.admin.post("/admin/agent_exited", json={}).status_code == 200
    assert running.daemon.agent_phase_over
