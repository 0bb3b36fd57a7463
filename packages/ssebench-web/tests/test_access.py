"""Without the token nothing is served; WebSockets also need the page's own origin."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from .conftest import TOKEN, ReachingBackend, fake_run, record, summary


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/runs/r1",
        "/evals/e1",
        "/api/runs",
        "/api/runs/r1",
        "/api/runs/r1/logs",
        "/api/runs/r1/dialog",
        "/api/runs/r1/daemon/diff",
        "/api/evals",
        "/static/run.js",
        "/vendor/xterm/lib/xterm.js",
    ],
)
def test_every_page_and_api_call_without_the_token_is_403(anonymous: TestClient, path: str) -> None:
    answer = anonymous.get(path)
    assert answer.status_code == 403
    assert "token" in answer.text


def test_a_wrong_token_is_403_and_sets_no_cookie(anonymous: TestClient) -> None:
    answer = anonymous.get("/?token=wrong", follow_redirects=False)
    assert answer.status_code == 403
    assert "set-cookie" not in answer.headers
    anonymous.cookies.set("ssebench_web_token", "wrong")
    assert anonymous.get("/api/runs").status_code == 403


def test_the_token_in_the_url_becomes_a_cookie_and_leaves_the_address(
    anonymous: TestClient,
) -> None:
    first = anonymous.get(f"/runs/r1?token={TOKEN}&x=1", follow_redirects=False)
    assert first.status_code == 303
    assert first.headers["location"] == "/runs/r1?x=1"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert anonymous.get("/api/runs").status_code == 200


def test_a_websocket_without_the_token_is_refused(
    anonymous: TestClient, backend: ReachingBackend, results: Path
) -> None:
    backend.add_run(fake_run("r1", results))
    record(results, "r1", summary("r1", "2025-01-01T00:00:00Z"))
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        anonymous.websocket_connect(
            "/api/runs/r1/terminal", headers={"origin": "http://testserver"}
        ),
    ):
        pass
    assert refused.value.code == 1008
    assert not (results / "probe-task/none/probe/r1/touched").exists()


def test_a_websocket_from_a_foreign_origin_is_refused_even_with_the_cookie(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    backend.add_run(fake_run("r1", results))
    record(results, "r1", summary("r1", "2025-01-01T00:00:00Z"))
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        client.websocket_connect(
            "/api/runs/r1/terminal", headers={"origin": "http://evil.example"}
        ),
    ):
        pass
    assert refused.value.code == 1008
    assert not (results / "probe-task/none/probe/r1/touched").exists()


def test_a_malformed_cookie_header_is_no_token(anonymous: TestClient) -> None:
    answer = anonymous.get("/api/runs", headers={"cookie": 'ssebench_web_token="\\x"; ;;=='})
    assert answer.status_code == 403
