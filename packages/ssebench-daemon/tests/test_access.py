"""The access matrix of docs/agents.md over the real wire (both agent-facing listeners)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from ssebench.daemon import ACTIONS, ALLOWED

from .conftest import Running

pytestmark = pytest.mark.process

ADMIN_ROUTES = [
    ("POST", "/prepare_grading"),
    ("POST", "/admin/agent_exited"),
    ("GET", "/reference/patch"),
]
READ_ROUTES = ["/version", "/project", "/capabilities", "/diff", "/files", "/agent/dialog"]


def bencher(client: httpx.Client, action: str, **body: object) -> httpx.Response:
    return client.post("/tool/bencher", params={"action": action}, json=body)


def bash(client: httpx.Client, command: str) -> httpx.Response:
    return client.post("/tool/bash", params={"action": "execute"}, json={"command": command})


@pytest.mark.parametrize("difficulty", [0, 1, 2, 3, 4])
def test_every_route_on_every_listener_follows_the_access_matrix(
    start_daemon: Callable[..., Running], difficulty: int
) -> None:
    daemon = start_daemon(difficulty=difficulty)
    for client in (*daemon.agent_facing, daemon.admin):
        for path in READ_ROUTES:
            assert client.get(path).status_code == 200, path
        assert client.get("/result").status_code == 404
        assert client.get("/final_diff").status_code == 409
        assert bash(client, "echo ok").json()["stdout"] == "ok\n"

    for client in daemon.agent_facing:
        for action in ACTIONS:
            response = bencher(client, action, poc=0)
            if action in ALLOWED[difficulty]:
                assert response.status_code == 200, action
                assert "code" in response.json()
            else:
                assert response.status_code == 403, action
                assert response.json()["code"] == "withheld"
        for method, path in ADMIN_ROUTES:
            response = client.request(method, path)
            assert response.status_code == 403, path
            assert response.json()["code"] == "admin_only"
        assert bencher(client, "build", grading=True).status_code == 403

    for action in ACTIONS:
        assert bencher(daemon.admin, action, poc=0).status_code == 200, action
    assert daemon.admin.get("/reference/patch").json()["diff"].startswith("diff --git")


@pytest.mark.parametrize("difficulty", [0, 2, 4])
def test_capabilities_say_what_the_listener_allows_and_the_task_has(
    start_daemon: Callable[..., Running], difficulty: int
) -> None:
    daemon = start_daemon(difficulty=difficulty)
    allowed = ALLOWED[difficulty]
    for client in daemon.agent_facing:
        assert client.get("/capabilities").json() == {
            "can_build": "build" in allowed,
            "can_run_poc": "run_poc" in allowed,
            "poc_count": 2 if "run_poc" in allowed else 0,
            "has_function_test": "function_test" in allowed,
            "has_intent_test": "intent_test" in allowed,
        }
    assert daemon.admin.get("/capabilities").json() == {
        "can_build": True,
        "can_run_poc": True,
        "poc_count": 2,
        "has_function_test": True,
        "has_intent_test": True,
    }


def test_after_agent_exited_every_tool_is_refused_on_agent_facing_listeners(
    running: Running,
) -> None:
    # Wait until the detached process is in its own session before ending the phase.
    started = bash(
        running.agent,
        "setsid sh -c 'echo $$ > .detached; exec sleep 1000' & "
        "while [ ! -s .detached ]; do sleep 0.01; done; echo ok",
    )
    assert started.json()["stdout"] == "ok\n"
    first = running.admin.post("/admin/agent_exited")
    assert first.status_code == 200
    assert first.json()["success"] is True
    assert first.json()["killed"] >= 1
    for client in running.agent_facing:
        for response in (
            bash(client, "true"),
            bencher(client, "build"),
            bencher(client, "nonsense"),
            client.post("/tool/bash", params={"action": "other"}, content=b"{"),
        ):
            assert response.status_code == 403
            assert response.json()["code"] == "agent_phase_over"
        assert client.get("/version").status_code == 200
    # Idempotent; the admin socket keeps its checks, but the shell as model never starts
    # again (no code of the agent runs after the agent phase, except inside a check).
    assert running.admin.post("/admin/agent_exited").status_code == 200
    refused = bash(running.admin, "echo still")
    assert (refused.status_code, refused.json()["code"]) == (403, "agent_phase_over")
    assert bencher(running.admin, "build").json()["code"] == 0


def test_project_shows_only_public_metadata(running: Running) -> None:
    for client in (*running.agent_facing, running.admin):
        project = client.get("/project").json()
        assert set(project) == {
            "id", "project", "language", "source", "task_description", "scripts"
        }  # fmt: skip
        assert project["task_description"]["crash_report"] == ["CRASH REPORT TEXT\n"]
        assert set(project["scripts"]) == {"build", "test"}
        assert "cp lib.txt built.txt" in project["scripts"]["build"]
        text = client.get("/project").text
        for secret in ("SECRET", "pocs/", "diffs/", "run.sh", "grep -q fixed", "repository"):
            assert secret not in text


def test_the_reference_patch_is_admin_only_at_all_times(running: Running) -> None:
    for _ in range(2):
        for client in running.agent_facing:
            response = client.get("/reference/patch")
            assert response.status_code == 403
            assert "fixed" not in response.text
        assert "+fixed" in running.admin.get("/reference/patch").json()["diff"]
        running.admin.post("/admin/agent_exited")
