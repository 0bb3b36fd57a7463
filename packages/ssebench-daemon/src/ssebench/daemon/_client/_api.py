"""Typed calls to the daemon: the wire Structs of `ssebench.daemon._messages` over a socket."""

from __future__ import annotations

from typing import TypeVar

from ssebench.daemon._client._errors import DaemonProtocolError, DaemonRefusedError, refusal
from ssebench.daemon._client._http import DEFAULT_TIMEOUT, Reply, UnixHTTPClient
from ssebench.daemon._gate import Action
from ssebench.daemon._messages import (
    AgentExitedRequest,
    AgentExitedResponse,
    BencherRequest,
    BencherResponse,
    CapabilitiesResponse,
    PrepareGradingResponse,
    ProjectResponse,
    VersionResponse,
)
from ssebench.spec import DecodeError, Message, decode_json, encode_json

T = TypeVar("T", bound=Message)

__all__ = ["DaemonApi", "DaemonProtocolError", "DaemonRefusedError"]


class DaemonApi:
    """The routes the entrypoint, evaluator and MCP server use, on one socket."""

    def __init__(self, socket_path: str) -> None:
        self.client = UnixHTTPClient(socket_path)

    def _decode(self, what: str, reply: Reply, into: type[T]) -> T:
        if not reply.ok:
            raise refusal(what, reply)
        try:
            return decode_json(reply.body, into, what=what)
        except DecodeError as exc:
            raise DaemonProtocolError(str(exc)) from exc

    def version(self, *, timeout: float | None = DEFAULT_TIMEOUT) -> VersionResponse:
        """`GET /version`.

        Raises:
            DaemonUnreachableError: nothing answers on the socket.
            DaemonRefusedError: an error status (the subclass its code names).
            DaemonProtocolError: an answer of the wrong shape.
            DaemonTimeoutError: no answer in time.
        """
        return self._decode(
            "version", self.client.get("/version", timeout=timeout), VersionResponse
        )

    def project(self) -> ProjectResponse:
        """`GET /project` (errors as for `version`)."""
        return self._decode("project", self.client.get("/project"), ProjectResponse)

    def capabilities(self) -> CapabilitiesResponse:
        """`GET /capabilities` (errors as for `version`)."""
        return self._decode("capabilities", self.client.get("/capabilities"), CapabilitiesResponse)

    def bencher(
        self, action: Action, request: BencherRequest, *, timeout: float | None
    ) -> BencherResponse:
        """`POST /tool/bencher?action=…`: one check; a failing script is a non-zero `code`.

        Raises:
            DaemonRefusedError: withheld (403), no such check (404), a bad request
                (400), or the daemon failed (5xx).
            (and the errors of `version`)
        """
        reply = self.client.post(
            f"/tool/bencher?action={action}", encode_json(request), timeout=timeout
        )
        return self._decode(action, reply, BencherResponse)

    def prepare_grading(self, *, timeout: float | None) -> PrepareGradingResponse:
        """`POST /prepare_grading` (admin socket; errors as for `bencher`)."""
        reply = self.client.post("/prepare_grading", timeout=timeout)
        return self._decode("prepare_grading", reply, PrepareGradingResponse)

    def agent_exited(
        self, *, exit_code: int | None = None, timeout: float | None = DEFAULT_TIMEOUT
    ) -> AgentExitedResponse:
        """`POST /admin/agent_exited` (admin socket; errors as for `bencher`), with how
        the agent's process ended when the caller knows (`AgentExitedRequest`)."""
        reply = self.client.post(
            "/admin/agent_exited",
            encode_json(AgentExitedRequest(exit_code=exit_code)),
            timeout=timeout,
        )
        return self._decode("agent_exited", reply, AgentExitedResponse)
