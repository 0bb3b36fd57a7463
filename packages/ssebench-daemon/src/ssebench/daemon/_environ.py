"""The container's environment, parsed: the one parser for the daemon server
(`server._config`), the entrypoint (`entrypoint._settings`) and the MCP server.

A bad value raises `ConfigError` with one line naming the variable and what is
allowed; the program refuses to start. Standard library only: the entrypoint
imports it and must stay small during the agent phase.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ssebench.daemon._errors import ConfigError
from ssebench.spec import contract

_DIFFICULTY: Final = re.compile(r"[0-4]")

REPORT_FD_ENV: Final = "SSE_AGENT_REPORT_FD"
"""Set by the entrypoint of a checker for its daemon only: the pipe on which the daemon
hands over the first `POST /admin/agent_exited` that says how the agent's process
ended (the backend's report from the agent container)."""


def parse_difficulty(value: str | None) -> int:
    """`SSE_DIFFICULTY`: unset means the default (2); anything but 0-4 is refused.

    Raises:
        ConfigError: the value is not one of 0, 1, 2, 3, 4.
    """
    if value is None:
        return contract.DEFAULT_DIFFICULTY
    if _DIFFICULTY.fullmatch(value) is None:
        raise ConfigError(
            f"{contract.ENV_DIFFICULTY}={value!r} is not a difficulty: "
            "use an integer from 0 (every check) to 4 (none), or leave it unset for 2"
        )
    return int(value)


def parse_seconds(name: str, value: str | None, default: float) -> float:
    """A time limit from the variable `name`: unset or empty means `default`.

    Raises:
        ConfigError: the value is not a positive number of seconds.
    """
    if value is None or value == "":
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(f"{name}={value!r} is not a time limit: use a positive number of seconds")
    return seconds


def parse_check_timeout(value: str | None) -> float:
    """`SSE_CHECK_TIMEOUT`: seconds one check may take; unset means 1800.

    Raises:
        ConfigError: the value is not a positive number.
    """
    return parse_seconds(contract.ENV_CHECK_TIMEOUT, value, float(contract.DEFAULT_CHECK_TIMEOUT))


def parse_pids_limit(value: str | None) -> int | None:
    """`SSE_PIDS_LIMIT`: the run's process limit; unset or empty means none is held here.

    Raises:
        ConfigError: the value is not a positive whole number.
    """
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit() and int(value) > 0):
        raise ConfigError(
            f"{contract.ENV_PIDS_LIMIT}={value!r} is not a process limit: "
            "use a positive whole number, or leave it unset"
        )
    return int(value)


def agent_socket(environ: Mapping[str, str]) -> str:
    """`SSE_DAEMON_SOCKET`: the agent's socket; unset means the sandbox mode's.

    Raises:
        ConfigError: not an absolute path, or the admin socket's.
    """
    socket = environ.get(contract.ENV_DAEMON_SOCKET) or contract.SANDBOX_DAEMON_SOCKET
    if not socket.startswith("/"):
        raise ConfigError(f"{contract.ENV_DAEMON_SOCKET}={socket!r} must be an absolute path")
    if Path(socket) == Path(contract.ADMIN_SOCKET):
        raise ConfigError(f"{contract.ENV_DAEMON_SOCKET} must not be the admin socket's path")
    return socket


def results_dir(environ: Mapping[str, str]) -> Path:
    """`SSE_RESULTS`: where the run's results go; unset means the contract's folder."""
    return Path(environ.get(contract.ENV_RESULTS) or contract.RESULTS_DIR)


def archive_dir(environ: Mapping[str, str]) -> Path:
    """`SSE_ARCHIVE`: the agent's archive folder; unset means the contract's."""
    return Path(environ.get(contract.ENV_ARCHIVE) or contract.ARCHIVE_DIR)


def from_runtime(python: str) -> bool:
    """Whether `python` is the sealed runtime's, as in every SSEBench image (not the
    daemon's own tests on a host)."""
    return python.startswith(contract.RUNTIME_DIR + "/")
