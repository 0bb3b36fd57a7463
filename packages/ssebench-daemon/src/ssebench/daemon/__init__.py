"""In-container executables: the daemon (`python -m ssebench.daemon`), the
entrypoint, the evaluator and the MCP server.

The daemon serves one API on three listeners (docs/agents.md); the public names
here are what tests, benchmarks and the other in-container tools need.

Names load lazily (PEP 562): importing `ssebench.daemon.entrypoint` or
`ssebench.daemon._client` runs this file first, and the entrypoint must stay
small in memory during the agent phase, so nothing heavy is imported here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ssebench.daemon._errors import ApiError, ConfigError, DaemonError, ErrorCode
    from ssebench.daemon._gate import ACTIONS, ALLOWED, Action
    from ssebench.daemon._messages import (
        AgentExitedRequest,
        AgentExitedResponse,
        BashRequest,
        BashResponse,
        BencherRequest,
        BencherResponse,
        CapabilitiesResponse,
        ChangedFile,
        DialogResponse,
        DiffResponse,
        ErrorResponse,
        FilesResponse,
        FinalDiffResponse,
        PrepareGradingResponse,
        ProjectResponse,
        ReferencePatchResponse,
        VersionResponse,
    )
    from ssebench.daemon._users import Identity
    from ssebench.daemon.server._app import ROUTES, build_app
    from ssebench.daemon.server._checks import Privileges
    from ssebench.daemon.server._config import DaemonConfig, load_config
    from ssebench.daemon.server._core import Daemon, daemon_version
    from ssebench.daemon.server._openapi import openapi_document, openapi_json
    from ssebench.daemon.server._procs import ProcessKiller, UidKiller
    from ssebench.daemon.server._server import Listeners, bind_all, main

_HOMES: dict[str, str] = {
    "ACTIONS": "ssebench.daemon._gate",
    "ALLOWED": "ssebench.daemon._gate",
    "Action": "ssebench.daemon._gate",
    "AgentExitedRequest": "ssebench.daemon._messages",
    "AgentExitedResponse": "ssebench.daemon._messages",
    "ApiError": "ssebench.daemon._errors",
    "BashRequest": "ssebench.daemon._messages",
    "BashResponse": "ssebench.daemon._messages",
    "BencherRequest": "ssebench.daemon._messages",
    "BencherResponse": "ssebench.daemon._messages",
    "CapabilitiesResponse": "ssebench.daemon._messages",
    "ChangedFile": "ssebench.daemon._messages",
    "ConfigError": "ssebench.daemon._errors",
    "Daemon": "ssebench.daemon.server._core",
    "DaemonConfig": "ssebench.daemon.server._config",
    "DaemonError": "ssebench.daemon._errors",
    "DialogResponse": "ssebench.daemon._messages",
    "DiffResponse": "ssebench.daemon._messages",
    "ErrorCode": "ssebench.daemon._errors",
    "ErrorResponse": "ssebench.daemon._messages",
    "FilesResponse": "ssebench.daemon._messages",
    "FinalDiffResponse": "ssebench.daemon._messages",
    "Identity": "ssebench.daemon._users",
    "Listeners": "ssebench.daemon.server._server",
    "PrepareGradingResponse": "ssebench.daemon._messages",
    "Privileges": "ssebench.daemon.server._checks",
    "ProcessKiller": "ssebench.daemon.server._procs",
    "ProjectResponse": "ssebench.daemon._messages",
    "ROUTES": "ssebench.daemon.server._app",
    "ReferencePatchResponse": "ssebench.daemon._messages",
    "UidKiller": "ssebench.daemon.server._procs",
    "VersionResponse": "ssebench.daemon._messages",
    "bind_all": "ssebench.daemon.server._server",
    "build_app": "ssebench.daemon.server._app",
    "daemon_version": "ssebench.daemon.server._core",
    "load_config": "ssebench.daemon.server._config",
    "main": "ssebench.daemon.server._server",
    "openapi_document": "ssebench.daemon.server._openapi",
    "openapi_json": "ssebench.daemon.server._openapi",
}
"""Each public name and the module it comes from."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "ACTIONS",
    "ALLOWED",
    "ROUTES",
    "Action",
    "AgentExitedRequest",
    "AgentExitedResponse",
    "ApiError",
    "BashRequest",
    "BashResponse",
    "BencherRequest",
    "BencherResponse",
    "CapabilitiesResponse",
    "ChangedFile",
    "ConfigError",
    "Daemon",
    "DaemonConfig",
    "DaemonError",
    "DialogResponse",
    "DiffResponse",
    "ErrorCode",
    "ErrorResponse",
    "FilesResponse",
    "FinalDiffResponse",
    "Identity",
    "Listeners",
    "PrepareGradingResponse",
    "Privileges",
    "ProcessKiller",
    "ProjectResponse",
    "ReferencePatchResponse",
    "UidKiller",
    "VersionResponse",
    "bind_all",
    "build_app",
    "daemon_version",
    "load_config",
    "main",
    "openapi_document",
    "openapi_json",
]
