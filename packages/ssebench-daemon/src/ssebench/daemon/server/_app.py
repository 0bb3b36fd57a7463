"""The HTTP API: one route table, served by one Starlette app per listener.

Each listener's app carries its privilege (`admin`); the route table is the
same for all three, and the OpenAPI document is generated from it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ssebench.daemon._errors import (
    ApiError,
    BadRequestError,
    BodyTooLargeError,
    MethodNotAllowedError,
    NotFoundError,
)
from ssebench.daemon._gate import ACTIONS
from ssebench.daemon._messages import (
    AgentExitedRequest,
    AgentExitedResponse,
    BashRequest,
    BashResponse,
    BencherRequest,
    BencherResponse,
    CapabilitiesResponse,
    DialogRequest,
    DialogResponse,
    DiffResponse,
    EmptyRequest,
    ErrorResponse,
    FilesResponse,
    FinalDiffResponse,
    PrepareGradingResponse,
    ProjectResponse,
    ReferencePatchResponse,
    VersionResponse,
)
from ssebench.daemon.server._core import Daemon
from ssebench.spec import Message, Result

log = logging.getLogger("ssebench.daemon")

T = TypeVar("T", bound=Message)

Access = Literal["all", "tool", "admin"]
"""Who may call a route: every listener; agent-facing during the agent phase (and
gated) plus admin; the admin socket only."""

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class QueryParam:
    """One query parameter, for the OpenAPI document."""

    name: str
    schema: dict[str, object]
    description: str
    required: bool = False


class Call:
    """One request as a handler sees it: the daemon, the listener's privilege, the query,
    and the body decoded into the route's request type."""

    def __init__(self, daemon: Daemon, admin: bool, request: Request, limit: int) -> None:
        self.daemon = daemon
        self.admin = admin
        self.request = request
        self.limit = limit

    def query(self, name: str) -> str | None:
        """A query parameter's value."""
        return self.request.query_params.get(name)

    async def body(self, into: type[T]) -> T:
        """The JSON body as `into` (an empty body is `{}`).

        Raises:
            BodyTooLargeError: over the limit.
            BadRequestError: not JSON, or not the right shape.
        """
        declared = self.request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            raise BodyTooLargeError(f"request body over {self.limit} bytes")
        chunks, size = [], 0
        async for chunk in self.request.stream():
            size += len(chunk)
            if size > self.limit:
                raise BodyTooLargeError(f"request body over {self.limit} bytes")
            chunks.append(chunk)
        data = b"".join(chunks).strip() or b"{}"
        try:
            return msgspec.json.decode(data, type=into)
        except msgspec.DecodeError as exc:
            raise BadRequestError(f"bad request body: {exc}") from exc


Handler = Callable[[Call], Awaitable[Message]]


@dataclass(frozen=True)
class RouteSpec:
    """One route: method, path, types, who may call it, and its handler."""

    method: Literal["GET", "POST"]
    path: str
    summary: str
    access: Access
    response: type[Message]
    handler: Handler
    request: type[Message] | None = None
    params: tuple[QueryParam, ...] = ()


# -- handlers ----------------------------------------------------------------------


async def _version(call: Call) -> VersionResponse:
    return call.daemon.version()


async def _project(call: Call) -> ProjectResponse:
    return call.daemon.project()


async def _capabilities(call: Call) -> CapabilitiesResponse:
    return call.daemon.capabilities(admin=call.admin)


async def _diff(call: Call) -> DiffResponse:
    return await call.daemon.diff()


async def _files(call: Call) -> FilesResponse:
    return await call.daemon.files()


async def _final_diff(call: Call) -> FinalDiffResponse:
    return call.daemon.final_diff()


async def _dialog(call: Call) -> DialogResponse:
    try:
        query = msgspec.convert({"since": call.query("since") or "0"}, DialogRequest, strict=False)
    except msgspec.ValidationError as exc:
        raise BadRequestError("'since' must be a whole number") from exc
    entries, following = await call.daemon.dialog(query.since)
    return DialogResponse(entries=entries, next=following)


async def _result(call: Call) -> Result:
    return call.daemon.result()


async def _bash(call: Call) -> BashResponse:
    call.daemon.check_bash(admin=call.admin, action=call.query("action"))
    return await call.daemon.bash(await call.body(BashRequest), admin=call.admin)


async def _bencher(call: Call) -> BencherResponse:
    action = call.daemon.check_bencher(admin=call.admin, action=call.query("action"))
    request = await call.body(BencherRequest)
    return await call.daemon.bencher(action, request, admin=call.admin)


async def _prepare_grading(call: Call) -> PrepareGradingResponse:
    call.daemon.require_admin(call.admin, "preparing grading")
    await call.body(EmptyRequest)
    return await call.daemon.prepare_grading(admin=call.admin)


async def _agent_exited(call: Call) -> AgentExitedResponse:
    call.daemon.require_admin(call.admin, "ending the agent phase")
    request = await call.body(AgentExitedRequest)
    return await call.daemon.agent_exited(admin=call.admin, exit_code=request.exit_code)


async def _reference_patch(call: Call) -> ReferencePatchResponse:
    return call.daemon.reference_patch(admin=call.admin)


_ACTION_PARAM: Final = QueryParam(
    "action",
    {"type": "string", "enum": list(ACTIONS)},
    "the check to run",
    required=True,
)

ROUTES: Final[tuple[RouteSpec, ...]] = (
    RouteSpec("GET", "/version", "The daemon's version.", "all", VersionResponse, _version),
    RouteSpec("GET", "/project", "The task's public metadata.", "all", ProjectResponse, _project),
    RouteSpec(
        "GET",
        "/capabilities",
        "The checks this listener allows and the task has.",
        "all",
        CapabilitiesResponse,
        _capabilities,
    ),
    RouteSpec(
        "GET", "/diff", "The agent's diff against the initial commit.", "all", DiffResponse, _diff
    ),
    RouteSpec("GET", "/files", "The paths the agent's diff touches.", "all", FilesResponse, _files),
    RouteSpec(
        "GET",
        "/final_diff",
        "The diff captured by prepare_grading (409 before).",
        "all",
        FinalDiffResponse,
        _final_diff,
    ),
    RouteSpec(
        "GET",
        "/agent/dialog",
        "The agent's dialog.jsonl entries from `since` on.",
        "all",
        DialogResponse,
        _dialog,
        params=(QueryParam("since", {"type": "integer", "minimum": 0}, "first entry (0-based)"),),
    ),
    RouteSpec("GET", "/result", "The grade (404 until written).", "all", Result, _result),
    RouteSpec(
        "POST",
        "/tool/bash",
        "Run a command in the persistent shell as `model`.",
        "tool",
        BashResponse,
        _bash,
        request=BashRequest,
        params=(QueryParam("action", {"type": "string", "enum": ["execute"]}, "always `execute`"),),
    ),
    RouteSpec(
        "POST",
        "/tool/bencher",
        "Run one check as `sse-runner` in a scratch copy.",
        "tool",
        BencherResponse,
        _bencher,
        request=BencherRequest,
        params=(_ACTION_PARAM,),
    ),
    RouteSpec(
        "POST",
        "/prepare_grading",
        "Start grading: fresh session, final.patch, the diff applied to /ssebench-repo.",
        "admin",
        PrepareGradingResponse,
        _prepare_grading,
        request=EmptyRequest,
    ),
    RouteSpec(
        "POST",
        "/admin/agent_exited",
        "End the agent phase: kill every `model` process, refuse agent-facing tools.",
        "admin",
        AgentExitedResponse,
        _agent_exited,
        request=AgentExitedRequest,
    ),
    RouteSpec(
        "GET",
        "/reference/patch",
        "The task's reference fix.",
        "admin",
        ReferencePatchResponse,
        _reference_patch,
    ),
)
"""Every route the daemon serves, on every listener."""


# -- Starlette glue ---------------------------------------------------------------------


def _json(value: Message, status: int = 200) -> Response:
    return Response(_encoder.encode(value), status_code=status, media_type="application/json")


def error_response(exc: ApiError) -> Response:
    """The wire form of an error."""
    return _json(ErrorResponse(error=exc.message, code=exc.code), exc.status)


def _endpoint(
    spec: RouteSpec, daemon: Daemon, admin: bool
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        call = Call(daemon, admin, request, daemon.config.max_body_bytes)
        try:
            return _json(await spec.handler(call))
        except ApiError as exc:
            if exc.status >= 500:
                log.error("%s %s: %s", spec.method, spec.path, exc.message)
            if exc.code == "agent_phase_over":
                # Not before the phase's checks are stopped: a check the agent started
                # must never see the phase end and go on (docs/integrity.md).
                await daemon.agent_phase_cleared()
            return error_response(exc)
        except Exception:
            log.exception("%s %s failed", spec.method, spec.path)
            return error_response(ApiError("the daemon failed; see daemon.log"))

    return endpoint


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    path = request.url.path
    if exc.status_code == 404:
        if path.startswith("/tool/"):
            tool = path.removeprefix("/tool/")
            return error_response(
                NotFoundError(f"unknown tool {tool!r}: the tools are bash and bencher")
            )
        return error_response(NotFoundError(f"no route {request.method} {path}"))
    if exc.status_code == 405:
        return error_response(MethodNotAllowedError(f"{request.method} is not allowed on {path}"))
    return error_response(BadRequestError(str(exc.detail)))


def build_app(daemon: Daemon, *, admin: bool) -> Starlette:
    """The app of one listener.

    Args:
        daemon: the shared state.
        admin: True for the admin socket, False for the agent-facing listeners.
    """
    routes = [
        Route(spec.path, _endpoint(spec, daemon, admin), methods=[spec.method]) for spec in ROUTES
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
