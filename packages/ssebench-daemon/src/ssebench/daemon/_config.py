"""The daemon's settings, read from the environment; bad values refuse the start."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ssebench.daemon._errors import ConfigError
from ssebench.spec import contract

STATE_DIR: Final = "/var/lib/ssebench-daemon"
"""The daemon's private state (root 0711): the diff baseline and per-diff git dirs."""

_DIFFICULTY = re.compile(r"[0-4]")


@dataclass(frozen=True, kw_only=True)
class DaemonConfig:
    """Where everything is and which limits apply; tests build one on temporary paths."""

    difficulty: int = contract.DEFAULT_DIFFICULTY
    check_timeout: float = float(contract.DEFAULT_CHECK_TIMEOUT)
    agent_socket: Path = Path(contract.SANDBOX_DAEMON_SOCKET)
    admin_socket: Path = Path(contract.ADMIN_SOCKET)
    http_host: str = "0.0.0.0"  # noqa: S104 - the agent-facing port listens on every interface
    http_port: int | None = contract.DAEMON_PORT
    results_dir: Path = Path(contract.RESULTS_DIR)
    archive_dir: Path = Path(contract.ARCHIVE_DIR)
    task_dir: Path = Path(contract.TASK_DIR)
    task_config: Path = Path(contract.TASK_CONFIG)
    repo_dir: Path = Path(contract.REPO_DIR)
    scratch_dir: Path = Path(contract.SCRATCH_DIR)
    state_dir: Path = Path(STATE_DIR)
    max_body_bytes: int = contract.MAX_BODY_BYTES
    max_stream_bytes: int = contract.MAX_STREAM_BYTES


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


def parse_check_timeout(value: str | None) -> float:
    """`SSE_CHECK_TIMEOUT`: seconds one check may take; unset means 1800.

    Raises:
        ConfigError: the value is not a positive number.
    """
    if value is None:
        return float(contract.DEFAULT_CHECK_TIMEOUT)
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(
            f"{contract.ENV_CHECK_TIMEOUT}={value!r} is not a time limit: "
            "use a positive number of seconds"
        )
    return seconds


def load_config(environ: Mapping[str, str]) -> DaemonConfig:
    """Build the configuration from the container's environment.

    Args:
        environ: the environment (`os.environ` in the container).

    Returns:
        The configuration; paths the environment does not name are the contract's.

    Raises:
        ConfigError: a value is invalid; the message names the variable.
    """
    agent_socket = environ.get(contract.ENV_DAEMON_SOCKET) or contract.SANDBOX_DAEMON_SOCKET
    if not agent_socket.startswith("/"):
        raise ConfigError(f"{contract.ENV_DAEMON_SOCKET}={agent_socket!r} must be an absolute path")
    if Path(agent_socket) == Path(contract.ADMIN_SOCKET):
        raise ConfigError(f"{contract.ENV_DAEMON_SOCKET} must not be the admin socket's path")
    return DaemonConfig(
        difficulty=parse_difficulty(environ.get(contract.ENV_DIFFICULTY)),
        check_timeout=parse_check_timeout(environ.get(contract.ENV_CHECK_TIMEOUT)),
        agent_socket=Path(agent_socket),
        results_dir=Path(environ.get(contract.ENV_RESULTS) or contract.RESULTS_DIR),
        archive_dir=Path(environ.get(contract.ENV_ARCHIVE) or contract.ARCHIVE_DIR),
    )
