"""The daemon's settings, read from the environment (by `ssebench.daemon._environ`);
bad values refuse the start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ssebench.daemon._environ import (
    REPORT_FD_ENV,
    agent_socket,
    archive_dir,
    parse_check_timeout,
    parse_difficulty,
    results_dir,
)
from ssebench.daemon._errors import ConfigError
from ssebench.spec import contract

STATE_DIR: Final = "/var/lib/ssebench-daemon"
"""The daemon's private state (root 0711): the diff baseline and per-diff git dirs."""


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
    report_fd: int | None = None
    """Where the agent's exit status goes (`REPORT_FD_ENV`); None: nobody waits for it."""


def load_config(environ: Mapping[str, str]) -> DaemonConfig:
    """Build the configuration from the container's environment.

    Args:
        environ: the environment (`os.environ` in the container).

    Returns:
        The configuration; paths the environment does not name are the contract's.

    Raises:
        ConfigError: a value is invalid; the message names the variable.
    """
    return DaemonConfig(
        difficulty=parse_difficulty(environ.get(contract.ENV_DIFFICULTY)),
        check_timeout=parse_check_timeout(environ.get(contract.ENV_CHECK_TIMEOUT)),
        agent_socket=Path(agent_socket(environ)),
        results_dir=results_dir(environ),
        archive_dir=archive_dir(environ),
        report_fd=_report_fd(environ.get(REPORT_FD_ENV)),
    )


def _report_fd(value: str | None) -> int | None:
    """`REPORT_FD_ENV`: a descriptor number above the standard three, or unset.

    Raises:
        ConfigError: anything else.
    """
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit() and int(value) > 2):
        raise ConfigError(f"{REPORT_FD_ENV}={value!r} is not a descriptor number above 2")
    return int(value)
