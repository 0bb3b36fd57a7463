"""The gateway's key store as a Kubernetes runner reaches it: an admin route over HTTP.

On Docker the runner opens the key store's SQLite file itself (a bind mount). On
Kubernetes the file lives in the gateway's pod, in a namespace of its own where
the backend's Role holds one right: `services/proxy` on the Service
`ssebench-gateway-admin`, by name. So the runner speaks to this server through
the API server's service proxy, from wherever it runs (inside the pod network
or not), and never execs into the pod that reads the provider keys:

    python3.11 -m ssebench_gateway_admin init     # the init container: the store's file
    python3.11 -m ssebench_gateway_admin serve    # the admin container, port 4001

Every route but /health wants the admin token in the `X-SSEBench-Gateway-Token`
header (the API server consumes `Authorization` for its own authentication).
The token is a file of the gateway's Secret here, and a Secret in the runs'
namespace for the runner. Routes (JSON in, JSON out):

    GET  /health                  {"ok": true}              the kubelet's readiness probe
    GET  /info                    {"address", "models"}     the pod's address runs use
    POST /keys                    {"run_id", "models", "budget", "reservation"} -> {"key"}
    POST /keys/{run_id}/bind      {"network"} -> {"bound"}  the key then works from there only
    POST /keys/{run_id}/close     {} -> {"report"}          revoked; what the run used

A run's key is made here and sent once, to the runner, in the answer's body.
"""

from __future__ import annotations

import hmac
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

if TYPE_CHECKING:  # the same file, under the name the image gives it
    from ssebench.backends.docker._gateway_store import KeyStore
else:
    from ssebench_gateway_store import KeyStore

STATE = Path(os.environ.get("SSEBENCH_GATEWAY_STATE", "/var/lib/ssebench-gateway/keys.db"))
TOKEN_FILE = Path(os.environ.get("SSEBENCH_GATEWAY_TOKEN_FILE", "/run/ssebench-admin/token"))
TOKEN_HEADER: Final = "X-SSEBench-Gateway-Token"  # noqa: S105 - a header's name
ADMIN_PORT: Final = 4001
MODELS_ENV: Final = "GATEWAY_MODELS"
"""The models the proxy serves, a JSON list (names only: the keys stay in its own file)."""
ADDRESS_ENV: Final = "GATEWAY_POD_ADDRESS"
"""The pod's address (the downward API's status.podIP)."""


class BadRequest(Exception):
    """A body that is not what the route takes: answered 400 with this message."""


def _field(body: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = body.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise BadRequest(f"{name!r} is missing or of the wrong type")
    return value


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        raise BadRequest("the body is not JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the body is not a JSON object")
    return body


def application(store: KeyStore, token: bytes, models: list[str], address: str) -> Starlette:
    """The admin routes over `store`, for callers that present `token`."""

    def allowed(request: Request) -> bool:
        given = request.headers.get(TOKEN_HEADER, "").encode()
        return bool(given) and hmac.compare_digest(given, token)

    def refused() -> JSONResponse:
        return JSONResponse({"error": f"no valid {TOKEN_HEADER}"}, status_code=401)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    async def info(request: Request) -> JSONResponse:
        if not allowed(request):
            return refused()
        return JSONResponse({"address": address, "models": models})

    async def open_key(request: Request) -> JSONResponse:
        if not allowed(request):
            return refused()
        try:
            body = await _body(request)
            run_id = _field(body, "run_id", str)
            wanted = _field(body, "models", list)
            if not all(isinstance(model, str) for model in wanted):
                raise BadRequest("'models' is not a list of names")
            budget = body.get("budget")
            if budget is not None:
                budget = float(_field(body, "budget", (int, float)))
            reservation = float(_field(body, "reservation", (int, float)))
        except BadRequest as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        key = await run_in_threadpool(store.create_key, run_id, wanted, budget, reservation)
        return JSONResponse({"key": key})

    async def bind(request: Request) -> JSONResponse:
        if not allowed(request):
            return refused()
        try:
            network = _field(await _body(request), "network", str)
        except BadRequest as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        await run_in_threadpool(store.bind, request.path_params["run_id"], network)
        return JSONResponse({"bound": network})

    async def close(request: Request) -> JSONResponse:
        if not allowed(request):
            return refused()
        # A revoke waits for the run's last calls to settle: off the event loop, so that
        # other runs' keys are opened and closed meanwhile.
        used = await run_in_threadpool(store.revoke, request.path_params["run_id"])
        return JSONResponse({"report": None if used is None else used.report()})

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/info", info, methods=["GET"]),
            Route("/keys", open_key, methods=["POST"]),
            Route("/keys/{run_id}/bind", bind, methods=["POST"]),
            Route("/keys/{run_id}/close", close, methods=["POST"]),
        ]
    )


def serve() -> None:
    """Serve the admin routes on ADMIN_PORT until stopped."""
    import uvicorn

    token = TOKEN_FILE.read_bytes().strip()
    if len(token) < 32:
        raise SystemExit(f"the admin token in {TOKEN_FILE} is missing or too short")
    models = json.loads(os.environ.get(MODELS_ENV) or "[]")
    store = KeyStore(STATE)
    store.initialize()
    app = application(store, token, models, os.environ.get(ADDRESS_ENV, ""))
    # Every interface: the API server's proxy connects to the pod's address.
    uvicorn.run(app, host="0.0.0.0", port=ADMIN_PORT, log_level="warning", access_log=False)  # noqa: S104


def main(argv: list[str]) -> None:
    """Carry out one command: `init` or `serve`."""
    if argv == ["init"]:
        KeyStore(STATE).initialize()
        sys.stdout.write(json.dumps({"initialized": str(STATE)}) + "\n")
    elif argv == ["serve"]:
        serve()
    else:
        raise SystemExit(f"unknown command {' '.join(argv)!r}: init or serve")


if __name__ == "__main__":
    main(sys.argv[1:])
