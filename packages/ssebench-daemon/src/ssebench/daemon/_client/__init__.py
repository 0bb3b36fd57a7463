"""Clients of the daemon's wire for the entrypoint, the evaluator and the MCP server.

`UnixHTTPClient` uses the standard library only; typed calls (msgspec) live in
`ssebench.daemon._client._api`, imported only by those who need them. Every
error a client sees is in `ssebench.daemon._client._errors`, under the
package's root `DaemonError`.
"""

from ssebench.daemon._client._errors import (
    REFUSALS,
    DaemonAdminOnlyError,
    DaemonAgentPhaseOverError,
    DaemonBadRequestError,
    DaemonBodyTooLargeError,
    DaemonConflictError,
    DaemonConnectionError,
    DaemonDiffTooLargeError,
    DaemonForbiddenError,
    DaemonInternalError,
    DaemonMethodNotAllowedError,
    DaemonNotFoundError,
    DaemonPatchDidNotApplyError,
    DaemonProtocolError,
    DaemonRefusedError,
    DaemonTimeoutError,
    DaemonTreeUnreadableError,
    DaemonUnreachableError,
    DaemonWithheldError,
    refusal,
)
from ssebench.daemon._client._http import DEFAULT_TIMEOUT, Reply, UnixHTTPClient

__all__ = [
    "DEFAULT_TIMEOUT",
    "REFUSALS",
    "DaemonAdminOnlyError",
    "DaemonAgentPhaseOverError",
    "DaemonBadRequestError",
    "DaemonBodyTooLargeError",
    "DaemonConflictError",
    "DaemonConnectionError",
    "DaemonDiffTooLargeError",
    "DaemonForbiddenError",
    "DaemonInternalError",
    "DaemonMethodNotAllowedError",
    "DaemonNotFoundError",
    "DaemonPatchDidNotApplyError",
    "DaemonProtocolError",
    "DaemonRefusedError",
    "DaemonTimeoutError",
    "DaemonTreeUnreadableError",
    "DaemonUnreachableError",
    "DaemonWithheldError",
    "Reply",
    "UnixHTTPClient",
    "refusal",
]
