"""The entrypoint's settings: the agent command (argv), the environment and the contract."""

from __future__ import annotations

import math
import pwd
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ssebench.daemon._budget import grading_budget
from ssebench.daemon.entrypoint._contract import contract

DEFAULT_TIMEOUT: Final = 3600.0
"""The agent's time limit when `TIMEOUT` is unset."""

START_TIMEOUT: Final = 120.0
"""Seconds the daemon and the MCP server may take to come up."""

EVALUATOR_GRACE: Final = 60.0
"""Seconds the evaluator gets beyond its own limit before the entrypoint kills it."""

SERVICE_STOP_WAIT: Final = 4.0
"""Seconds the daemon and the MCP server get to exit after SIGTERM before SIGKILL."""

AGENT_ENV_PASSED: Final = (
    contract.ENV_API_KEY,
    contract.ENV_BASE_URL,
    contract.ENV_MODEL_NAME,
    contract.ENV_ARCHIVE,
    contract.ENV_DIFFICULTY,
    contract.ENV_TIMEOUT,
)
"""The run's variables the agent gets as given (SSE_DAEMON_SOCKET is always set)."""

MCP_HOST: Final = "127.0.0.1"
"""The MCP server listens on the loopback only: other containers must not call it."""


class SettingsError(Exception):
    """The entrypoint cannot run as configured; the message says what to fix."""


@dataclass(frozen=True, kw_only=True)
class ModelUser:
    """The agent's account."""

    name: str
    uid: int
    gid: int
    home: str


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything the entrypoint reads from its command line, environment and image."""

    agent_command: list[str]
    timeout: float = DEFAULT_TIMEOUT
    keep_alive: bool = False
    results_dir: Path = Path(contract.RESULTS_DIR)
    archive_dir: Path = Path(contract.ARCHIVE_DIR)
    admin_socket: Path = Path(contract.ADMIN_SOCKET)
    agent_socket: str = contract.SANDBOX_DAEMON_SOCKET
    start_daemon: bool = True
    mcp_host: str = MCP_HOST
    mcp_port: int = contract.MCP_PORT
    model: ModelUser = field(
        default_factory=lambda: ModelUser(
            name=contract.MODEL_USER,
            uid=contract.MODEL_UID,
            gid=contract.MODEL_UID,
            home="/home/model",
        )
    )
    environ: Mapping[str, str] = field(default_factory=dict)
    python: str = sys.executable
    daemon_argv: Sequence[str] = ()
    mcp_argv: Sequence[str] = ()
    evaluator_argv: Sequence[str] = ()
    check_timeout: float = float(contract.DEFAULT_CHECK_TIMEOUT)
    start_timeout: float = START_TIMEOUT
    evaluator_timeout: float | None = None
    """A fixed time limit for the evaluator (tests); None: `evaluator_budget` sizes it."""
    evaluator_grace: float = EVALUATOR_GRACE
    service_stop_wait: float = SERVICE_STOP_WAIT
    stop_grace: float = float(contract.STOP_GRACE)

    def evaluator_budget(self, checks: int | None) -> float:
        """The evaluator's own time limit: enough for each of the task's `checks` checks
        at its full limit, `SSE_CHECK_TIMEOUT` (`grading_budget` says what else it holds).

        Why not `TIMEOUT`, as before: the agent's limit says nothing about how long the
        project's checks take, and a budget below the sum of the checks' limits let a
        patch whose PoC hangs spend it, which graded the run `error` instead of
        `failed` (DESIGN.md §4: nothing the agent does turns `failed` into `error`).
        The evaluator hands each check its share of this budget and the daemon stops
        the check there, so the budget is only spent by the harness itself.

        Args:
            checks: how many checks grading runs; None when the daemon could not say
                (it is then most likely gone, and grading records that): the budget of
                a task with no check, enough to find out and write the grade.

        Returns:
            Seconds.
        """
        if self.evaluator_timeout is not None:
            return self.evaluator_timeout
        return grading_budget(checks or 0, self.check_timeout)

    def daemon_command(self) -> list[str]:
        """How the daemon is started.

        Every SSEBench process runs isolated (`-I`): nothing from PYTHON* variables
        or the working directory gets onto its import path.
        """
        return list(self.daemon_argv) or [self.python, "-I", "-m", "ssebench.daemon"]

    def mcp_command(self) -> list[str]:
        """How the MCP server is started."""
        return list(self.mcp_argv) or [
            self.python,
            "-I",
            "-m",
            "ssebench.daemon.mcp",
            "--host",
            self.mcp_host,
            "--port",
            str(self.mcp_port),
        ]

    def evaluator_command(self) -> list[str]:
        """How the evaluator is started (the agent's figures are appended)."""
        return list(self.evaluator_argv) or [
            self.python,
            "-I",
            "-m",
            "ssebench.daemon.evaluator",
            "--admin-socket",
            str(self.admin_socket),
            "--results",
            str(self.results_dir),
        ]


def parse_timeout(
    value: str | None, name: str = contract.ENV_TIMEOUT, default: float = DEFAULT_TIMEOUT
) -> float:
    """A time limit from the environment: `TIMEOUT` (the agent's; unset means an hour)
    or, with `name` and `default`, another such as `SSE_CHECK_TIMEOUT`.

    Raises:
        SettingsError: not a positive number.
    """
    if value is None or value == "":
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise SettingsError(
            f"{name}={value!r} is not a time limit: use a positive number of seconds"
        )
    return seconds


def lookup_model() -> ModelUser:
    """The `model` account from the image's passwd, or the contract's ids when it is missing."""
    try:
        entry = pwd.getpwnam(contract.MODEL_USER)
    except KeyError:
        return ModelUser(
            name=contract.MODEL_USER,
            uid=contract.MODEL_UID,
            gid=contract.MODEL_UID,
            home=f"/home/{contract.MODEL_USER}",
        )
    return ModelUser(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid, home=entry.pw_dir)


def load_settings(argv: Sequence[str], environ: Mapping[str, str]) -> Settings:
    """The settings of a container run.

    Args:
        argv: the agent command (the image's CMD).
        environ: the container's environment.

    Returns:
        The settings.

    Raises:
        SettingsError: no agent command, a bad `TIMEOUT` or `SSE_CHECK_TIMEOUT`, or
            `model` is root.
    """
    if not argv:
        raise SettingsError("no agent command: give it as the image's CMD or on the command line")
    agent_socket = environ.get(contract.ENV_DAEMON_SOCKET) or contract.SANDBOX_DAEMON_SOCKET
    model = lookup_model()
    if model.uid == 0:
        raise SettingsError(f"the {model.name!r} account must not be root")
    return Settings(
        agent_command=list(argv),
        timeout=parse_timeout(environ.get(contract.ENV_TIMEOUT)),
        check_timeout=parse_timeout(
            environ.get(contract.ENV_CHECK_TIMEOUT),
            contract.ENV_CHECK_TIMEOUT,
            float(contract.DEFAULT_CHECK_TIMEOUT),
        ),
        keep_alive=environ.get(contract.ENV_KEEP_ALIVE, "").strip() in ("1", "true", "yes"),
        results_dir=Path(environ.get(contract.ENV_RESULTS) or contract.RESULTS_DIR),
        archive_dir=Path(environ.get(contract.ENV_ARCHIVE) or contract.ARCHIVE_DIR),
        agent_socket=agent_socket,
        # Sidecar mode: the daemon runs in the task container; only its sockets are here.
        start_daemon=agent_socket != contract.SIDECAR_DAEMON_SOCKET,
        model=model,
        environ=dict(environ),
    )
