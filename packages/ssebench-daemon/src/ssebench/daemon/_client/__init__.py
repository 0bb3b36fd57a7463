"""Clients of the daemon's wire for the entrypoint, the evaluator and the MCP server.

`UnixHTTPClient` uses the standard library only; typed calls (msgspec) live in
`ssebench.daemon._client._api`, imported only by those who need them.
"""

from ssebench.daemon._client._http import (
    DEFAULT_TIMEOUT,
    DaemonUnreachableError,
    Reply,
    UnixHTTPClient,
)

__all__ = ["DEFAULT_TIMEOUT", "DaemonUnreachableError", "Reply", "UnixHTTPClient"]
