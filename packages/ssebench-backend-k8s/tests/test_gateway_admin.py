"""The gateway's admin route (images/proxy/ssebench_gateway_admin.py) on a real key store.

The module is loaded as the gateway's image has it, with the key store under the
name the image gives it; the cluster path (service proxy, Roles) is tests/k8s's.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from starlette.testclient import TestClient

from ssebench.backends.docker import _gateway_store
from ssebench.backends.k8s import _gateway
from ssebench.spec import BackendError

ADMIN = Path(__file__).resolve().parents[3] / "images/proxy/ssebench_gateway_admin.py"
TOKEN = "t" * 43


@pytest.fixture(scope="module")
def admin() -> ModuleType:
    sys.modules.setdefault("ssebench_gateway_store", _gateway_store)
    spec = importlib.util.spec_from_file_location("ssebench_gateway_admin", ADMIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def store(tmp_path: Path) -> _gateway_store.KeyStore:
    made = _gateway_store.KeyStore(tmp_path / "keys.db")
    made.initialize()
    return made


@pytest.fixture
def http(admin: ModuleType, store: _gateway_store.KeyStore) -> Iterator[TestClient]:
    app = admin.application(store, TOKEN.encode(), ["m"], "10.0.0.7")
    with TestClient(app) as made:
        yield made


def _auth(token: str = TOKEN) -> dict[str, str]:
    return {_gateway.TOKEN_HEADER: token}


def test_the_runner_and_the_image_agree_on_the_header_and_the_port(admin: ModuleType) -> None:
    assert admin.TOKEN_HEADER == _gateway.TOKEN_HEADER
    assert admin.ADMIN_PORT == _gateway.ADMIN_PORT


def test_every_route_but_health_wants_the_token(http: TestClient) -> None:
    assert http.get("/health").json() == {"ok": True}
    calls = [
        ("GET", "/info", None),
        ("POST", "/keys", {"run_id": "r", "models": ["m"], "budget": 1, "reservation": 0.1}),
        ("POST", "/keys/r/bind", {"network": "10.0.0.9/32"}),
        ("POST", "/keys/r/close", {}),
    ]
    for headers in ({}, _auth(""), _auth("x" * 43), _auth(TOKEN[:-1]), {"Authorization": TOKEN}):
        for method, path, body in calls:
            answer = http.request(method, path, json=body, headers=headers)
            assert answer.status_code == 401, (method, path, headers)
            assert "sk-" not in answer.text


def test_a_key_is_opened_bound_and_closed_with_what_it_used(
    http: TestClient, store: _gateway_store.KeyStore
) -> None:
    assert http.get("/info", headers=_auth()).json() == {"address": "10.0.0.7", "models": ["m"]}
    body = {"run_id": "r1", "models": ["m"], "budget": 0.5, "reservation": 0.1}
    key = http.post("/keys", json=body, headers=_auth()).json()["key"]
    assert key.startswith(_gateway_store.KEY_PREFIX)
    assert store.check(key, "10.0.0.9") == ["m"]
    bound = http.post("/keys/r1/bind", json={"network": "10.0.0.8/32"}, headers=_auth())
    assert bound.json() == {"bound": "10.0.0.8/32"}
    assert store.check(key, "10.0.0.8") == ["m"]
    assert not isinstance(store.check(key, "10.0.0.9"), list)  # from elsewhere: refused
    report = http.post("/keys/r1/close", json={}, headers=_auth()).json()["report"]
    assert report["spend"] == 0 and report["usage"]["calls"] == 0
    assert not isinstance(store.check(key, "10.0.0.8"), list)  # revoked
    # A key never opened: nothing to report.
    assert http.post("/keys/nope/close", json={}, headers=_auth()).json() == {"report": None}


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"run_id": 1, "models": ["m"], "reservation": 0.1},
        {"run_id": "r", "models": "m", "reservation": 0.1},
        {"run_id": "r", "models": [1], "reservation": 0.1},
        {"run_id": "r", "models": ["m"], "budget": "all", "reservation": 0.1},
        {"run_id": "r", "models": ["m"], "budget": True, "reservation": 0.1},
        {"run_id": "r", "models": ["m"]},
    ],
)
def test_a_malformed_key_request_is_answered_400_and_opens_nothing(
    http: TestClient, store: _gateway_store.KeyStore, body: dict[str, object]
) -> None:
    answer = http.post("/keys", json=body, headers=_auth())
    assert answer.status_code == 400 and "error" in answer.json()
    assert store.usage("r") is None


def test_a_body_that_is_not_a_json_object_is_answered_400(http: TestClient) -> None:
    for content in (b"[1]", b"not json"):
        answer = http.post("/keys/r/bind", content=content, headers=_auth())
        assert answer.status_code == 400


def test_a_close_that_waits_for_a_call_in_flight_holds_up_no_other_runs_key(
    http: TestClient, store: _gateway_store.KeyStore
) -> None:
    """A close waits (up to SETTLE_WAIT) for the run's calls in flight to settle; the
    admin server serves every run of an evaluation, so meanwhile it opens others' keys."""
    body = {"run_id": "slow", "models": ["m"], "budget": 1.0, "reservation": 0.1}
    key = http.post("/keys", json=body, headers=_auth()).json()["key"]
    assert isinstance(store.admit(key, "m"), _gateway_store.Admitted)  # never settled
    closing = threading.Thread(
        target=lambda: http.post("/keys/slow/close", json={}, headers=_auth())
    )
    started = time.monotonic()
    closing.start()
    time.sleep(0.5)
    other = {"run_id": "other", "models": ["m"], "budget": 1.0, "reservation": 0.1}
    assert http.post("/keys", json=other, headers=_auth()).status_code == 200
    assert time.monotonic() - started < _gateway_store.SETTLE_WAIT / 2
    assert closing.is_alive()  # still waiting for the call to settle
    closing.join()


class _Answer:
    def __init__(self, data: bytes) -> None:
        self.data = data


def _flapping(http: TestClient, unready: int) -> tuple[list[int], object]:
    """A stand-in for the API server's service proxy: 503 (no ready pod behind the
    Service) for the first `unready` calls, then the admin route itself."""
    seen: list[int] = []

    def request(api: object, method: str, path: str, **kwargs: Any) -> _Answer:
        seen.append(len(seen))
        if len(seen) <= unready:
            raise ApiException(status=503, reason="Service Unavailable")
        route = path.split("/proxy", 1)[1]
        reply = http.request(method, route, headers=kwargs["headers"], json=kwargs["body"])
        return _Answer(reply.content)

    return seen, request


def test_an_admin_call_waits_out_a_gateway_pod_that_is_briefly_unready(
    http: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A readiness probe that misses on a busy node takes the pod out of its Service
    for a moment: the call is sent again, not reported as a gateway that does not run."""
    seen, request = _flapping(http, unready=3)
    monkeypatch.setattr(_gateway.rest, "request", request)
    monkeypatch.setattr(_gateway, "_UNREADY_PAUSE", 0.01, raising=False)
    info = _gateway.admin_call(client.ApiClient(), "gw", TOKEN, "GET", "/info")
    assert len(seen) == 4 and info["models"] == ["m"]


def test_an_admin_call_to_a_gateway_unready_past_the_wait_says_none_runs(
    http: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen, request = _flapping(http, unready=10**6)
    monkeypatch.setattr(_gateway.rest, "request", request)
    monkeypatch.setattr(_gateway, "_UNREADY_PAUSE", 0.01)
    monkeypatch.setattr(_gateway, "UNREADY_WAIT", 0.2)
    with pytest.raises(BackendError, match="no model gateway runs in namespace gw"):
        _gateway.admin_call(client.ApiClient(), "gw", TOKEN, "GET", "/info")
    assert len(seen) > 1


def test_an_admin_call_with_no_service_at_all_says_none_runs_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []

    def request(api: object, method: str, path: str, **kwargs: Any) -> _Answer:
        seen.append(path)
        raise ApiException(status=404, reason="Not Found")

    monkeypatch.setattr(_gateway.rest, "request", request)
    with pytest.raises(BackendError, match="no model gateway runs in namespace gw"):
        _gateway.admin_call(client.ApiClient(), "gw", TOKEN, "GET", "/info")
    assert len(seen) == 1
