"""The entrypoint's settings: the agent command (argv), the environment (read by
`ssebench.daemon._environ`) and the contract."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ssebench.daemon._budget import grading_budget
from ssebench.daemon._environ import (
    agent_socket,
    archive_dir,
    parse_check_timeout,
    parse_pids_limit,
    parse_seconds,
    results_dir,
)
from ssebench.daemon._errors import ConfigError
from ssebench.daemon._users import Identity, model_identity
from ssebench.spec import contract

DEFAULT_TIMEOUT: Final = float(contract.DEFAULT_AGENT_TIMEOUT)
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
    contract.ENV_MODE,
    contract.ENV_MCP_URL,
)
"""The run's variables the agent gets as given (SSE_DAEMON_SOCKET is always set)."""

AGENT_CONTAINER_FLAG: Final = contract.AGENT_CONTAINER_FLAG
"""The entrypoint's one option: the agent runs in a container of its own (the checker of
a pair); the entrypoint waits for the backend's report of its end instead of running it."""

REPORT_GRACE: Final = 60.0
"""Seconds past `TIMEOUT` the checker waits for the backend's report of the agent's end
before it ends the agent phase itself (a backend that died, a run left behind)."""

MCP_HOST: Final = "127.0.0.1"
"""The MCP server listens on the loopback only: other containers must not call it."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything the entrypoint reads from its command line, environment and image."""

    agent_command: list[str]
    agent_container: bool = False
    """The agent runs in its own container (`AGENT_CONTAINER_FLAG`): `agent_command` is
    empty and the backend reports the agent's end over the admin socket."""
    report_grace: float = REPORT_GRACE
    agent_kill_file: Path | None = None
    """On Kubernetes (`contract.ENV_AGENT_KILL_FILE`): the checker answers the agent
    container's liveness probe (`_alive.py`) until this file exists."""
    go_file: Path = Path(contract.AGENT_GO_FILE)
    """Written when the agent container's launcher may start the agent."""
    timeout: float = DEFAULT_TIMEOUT
    keep_alive: bool = False
    results_dir: Path = Path(contract.RESULTS_DIR)
    archive_dir: Path = Path(contract.ARCHIVE_DIR)
    admin_socket: Path = Path(contract.ADMIN_SOCKET)
    agent_socket: str = contract.SANDBOX_DAEMON_SOCKET
    mcp_host: str = MCP_HOST
    mcp_port: int = contract.MCP_PORT
    model: Identity = field(
        default_factory=lambda: Identity(
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
    pids_limit: int | None = None
    """The run's process limit (`SSE_PIDS_LIMIT`), held by `ssebench.daemon._pids`; None:
    not held here."""
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
        `failed` (docs/integrity.md: nothing the agent does turns `failed` into `error`).
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


def load_settings(argv: Sequence[str], environ: Mapping[str, str]) -> Settings:
    """The settings of a container run.

    Args:
        argv: the agent command (the image's CMD).
        environ: the container's environment.

    Returns:
        The settings.

    Raises:
        ConfigError: no agent command, a bad `TIMEOUT`, `SSE_CHECK_TIMEOUT` or
            `SSE_PIDS_LIMIT`, or `model` is root.
    """
    agent_container = list(argv) == [AGENT_CONTAINER_FLAG]
    if not argv:
        raise ConfigError(
            "no agent command: give it as the image's CMD or on the command line, "
            f"or {AGENT_CONTAINER_FLAG} when the agent runs in a container of its own"
        )
    socket = agent_socket(environ)
    kill_file = environ.get(contract.ENV_AGENT_KILL_FILE) or None
    if kill_file is not None and not (agent_container and kill_file.startswith("/")):
        raise ConfigError(
            f"{contract.ENV_AGENT_KILL_FILE} must be an absolute path, and only a checker "
            f"({AGENT_CONTAINER_FLAG}) has one, not {kill_file!r}"
        )
    model = model_identity()
    if model.uid == 0:
        raise ConfigError(f"the {model.name!r} account must not be root")
    return Settings(
        agent_command=[] if agent_container else list(argv),
        agent_container=agent_container,
        agent_kill_file=None if kill_file is None else Path(kill_file),
        timeout=parse_seconds(
            contract.ENV_TIMEOUT, environ.get(contract.ENV_TIMEOUT), DEFAULT_TIMEOUT
        ),
        check_timeout=parse_check_timeout(environ.get(contract.ENV_CHECK_TIMEOUT)),
        pids_limit=parse_pids_limit(environ.get(contract.ENV_PIDS_LIMIT)),
        keep_alive=environ.get(contract.ENV_KEEP_ALIVE, "").strip() in ("1", "true", "yes"),
        results_dir=results_dir(environ),
        archive_dir=archive_dir(environ),
        agent_socket=socket,
        model=model,
        environ=dict(environ),
    )
