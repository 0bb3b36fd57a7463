"""Bad input gets a clear JSON error with an honest status, and the daemon keeps serving."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from .conftest import Running
from .fakes import write_script

pytestmark = pytest.mark.process


def assert_error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "code"}
    assert body["code"] == code
    assert body["error"]
    return str(body["error"])


def still_serving(daemon: Running) -> None:
    assert daemon.agent.get("/version").status_code == 200
    assert daemon.admin.get("/version").status_code == 200


def test_malformed_json_is_a_400(running: Running) -> None:
    for body in (b"{", b"[1, 2]", b'{"command": 5}', b"\xff\xfe"):
        assert_error(running.agent.post("/tool/bash", content=body), 400, "bad_request")
    message = assert_error(
        running.agent.post("/tool/bencher?action=run_poc", content=b'{"poc": [1]}'),
        400,
        "bad_request",
    )
    assert "poc" in message
    still_serving(running)


def test_unknown_routes_tools_actions_and_methods_are_named_in_the_error(running: Running) -> None:
    assert "no route GET /nowhere" in assert_error(running.agent.get("/nowhere"), 404, "not_found")
    message = assert_error(running.agent.post("/tool/python", json={}), 404, "not_found")
    assert "unknown tool 'python'" in message
    message = assert_error(
        running.agent.post("/tool/bencher", params={"action": "deploy"}, json={}),
        400,
        "bad_request",
    )
    assert "unknown action 'deploy'" in message
    assert "build" in message
    assert "no action" in assert_error(
        running.agent.post("/tool/bencher", json={}), 400, "bad_request"
    )
    assert_error(running.agent.post("/tool/bash?action=run", json={}), 400, "bad_request")
    assert_error(running.agent.delete("/version"), 405, "method_not_allowed")
    assert_error(
        running.agent.post("/tool/bencher?action=run_poc", json={"poc": 7}), 400, "bad_request"
    )
    assert_error(
        running.agent.post("/tool/bencher?action=run_poc", json={"poc": "pocs/nope"}),
        400,
        "bad_request",
    )
    assert_error(running.agent.get("/agent/dialog?since=x"), 400, "bad_request")
    assert_error(running.agent.get("/agent/dialog?since=-1"), 400, "bad_request")
    still_serving(running)


def test_a_body_over_the_limit_is_a_413(running: Running) -> None:
    big = b'{"command": "' + b"x" * (1024 * 1024) + b'"}'
    assert_error(running.agent.post("/tool/bash", content=big), 413, "body_too_large")

    def chunks() -> object:
        for _ in range(40):
            yield b" " * 65536

    response = running.agent.post("/tool/bash", content=chunks())  # type: ignore[arg-type]
    assert_error(response, 413, "body_too_large")
    # Just under the limit is fine.
    command = "echo " + "y" * (1024 * 1024 - 100)
    assert running.agent.post("/tool/bash", json={"command": command}).status_code == 200
    still_serving(running)


def test_a_command_printing_200_mb_keeps_the_first_mib_of_each_stream(running: Running) -> None:
    response = running.agent.post(
        "/tool/bash",
        json={"command": "head -c 200000000 /dev/zero | tr '\\0' a; head -c 3000000 /dev/zero >&2"},
    )
    assert response.status_code == 200
    body = response.json()
    assert body["code"] == 0
    assert body["truncated"] is True
    assert body["stdout"] == "a" * (1024 * 1024)
    assert len(body["stderr"]) == 1024 * 1024
    assert running.agent.post("/tool/bash", json={"command": "echo after"}).json() == {
        "code": 0,
        "stdout": "after\n",
        "stderr": "",
    }


def test_a_check_that_hangs_past_its_limit_is_stopped_with_a_clear_error(
    start_daemon: Callable[..., Running],
) -> None:
    daemon = start_daemon(check_timeout=2.0)
    write_script(
        daemon.config.task_dir / "scripts" / "build.sh",
        """\
        #!/bin/bash
        echo started
        setsid sleep 300 &
        sleep 300
        """,
    )
    response = daemon.agent.post("/tool/bencher", params={"action": "build"}, json={})
    assert response.status_code == 200
    body = response.json()
    assert body["code"] == -1
    assert body["timed_out"] is True
    assert body["stdout"] == "started\n"
    assert "stopped after 2 s" in body["stderr"]
    assert "SSE_CHECK_TIMEOUT" in body["stderr"]
    still_serving(daemon)
    # The shell's commands obey the same limit unless they ask for less.
    response = daemon.agent.post("/tool/bash", json={"command": "sleep 60"})
    assert response.json()["timed_out"] is True
    response = daemon.agent.post("/tool/bash", json={"command": "sleep 60", "timeout": 0.5})
    assert response.json()["timed_out"] is True
    assert (
        daemon.agent.post("/tool/bash", json={"command": "echo $((1+1))"}).json()["stdout"] == "2\n"
    )
