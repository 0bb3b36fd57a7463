"""The checked-in OpenAPI document is the one the code generates, and it describes
exactly the routes the listeners serve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.routing import Route

from ssebench.daemon import ROUTES, build_app, openapi_document, openapi_json

from .conftest import Running

CHECKED_IN = Path(__file__).resolve().parents[1] / "openapi.json"


def test_the_checked_in_document_matches_the_code() -> None:
    assert CHECKED_IN.read_bytes() == openapi_json(), (
        "packages/ssebench-daemon/openapi.json is out of date: run "
        "`uv run python -m ssebench.daemon --print-openapi > packages/ssebench-daemon/openapi.json`"
    )


def documented() -> set[tuple[str, str]]:
    paths = json.loads(CHECKED_IN.read_text())["paths"]
    return {(method.upper(), path) for path, item in paths.items() for method in item}


@pytest.mark.process
def test_every_listener_app_serves_exactly_the_documented_routes(running: Running) -> None:
    for admin in (False, True):
        app = build_app(running.daemon, admin=admin)
        served = {
            (method, route.path)
            for route in app.routes
            if isinstance(route, Route)
            for method in (route.methods or ())
            if method != "HEAD"
        }
        assert served == documented()
    assert {(spec.method, spec.path) for spec in ROUTES} == documented()


@pytest.mark.process
def test_each_documented_route_answers_on_the_wire_with_a_documented_status(
    running: Running,
) -> None:
    document = openapi_document()
    paths: dict[str, dict[str, dict[str, object]]] = document["paths"]  # type: ignore[assignment]
    schemas: dict[str, dict[str, object]] = document["components"]["schemas"]  # type: ignore[index]
    for path, item in paths.items():
        for method, operation in item.items():
            # Agent-facing socket: nothing here changes the daemon's state.
            response = running.agent.request(method.upper(), path)
            statuses: dict[str, object] = operation["responses"]  # type: ignore[assignment]
            assert str(response.status_code) in statuses, (method, path, response.text)
            assert response.status_code not in (404, 405) or path in ("/result",), (method, path)
            if response.status_code == 200:
                ref = statuses["200"]["content"]["application/json"]["schema"]["$ref"]  # type: ignore[index]
                schema = schemas[str(ref).rsplit("/", 1)[-1]]
                required = set(schema.get("required", []))  # type: ignore[call-overload]
                assert required <= set(response.json()), (path, required)
    # A path that is not documented is not served.
    assert running.agent.get("/openapi.json").status_code == 404
