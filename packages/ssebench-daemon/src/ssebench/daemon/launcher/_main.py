"""The agent container's PID 1: waits for the checker, runs the agent, ends what it left.

The backend starts the agent container as `model` (never root) with this as its
command, in the task's source tree; the agent's command is the one the seal recorded
in the image (`contract.AGENT_COMMAND_FILE`: its Dockerfile's CMD), or the launcher's
arguments, when given any (tests). The launcher:

1. waits until the checker's entrypoint has written `contract.AGENT_GO_FILE` on
   the shared sockets volume (its daemon and MCP server answer, the
   `before-agent` plugins ran);
2. runs the agent command in its own session, stdin closed, with the agent's
   environment (`entrypoint._agent.agent_env`, plus `SSE_MODE` and
   `SSE_MCP_URL`), its output relayed to the container's output up to
   `contract.AGENT_OUTPUT_LIMIT` bytes, at most `TIMEOUT` seconds (then 124);
3. holds the container to the run's process limit (`SSE_PIDS_LIMIT`) where the
   kernel does not (on Kubernetes; `_pids.PidsWatchdog`, its kill a `kill(-1)`);
4. kills every other process of the container once the agent's ended (as PID 1,
   `kill(-1)` reaches them all), and exits with the agent's status; with
   `SSE_KEEP_ALIVE=1` it stays up instead, reaping, so `runs exec --container
   agent` still finds a `model` shell there, until it is stopped.

It runs as `model`, like everything the agent starts, so nothing here is a
guarantee against the agent: the time limit, the output cap on the host's copy
(`agent.log`) and the end of the agent phase are the backend's and the checker's
to enforce. It saves an honest agent the wait for those.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from ssebench.daemon._environ import parse_pids_limit, parse_seconds
from ssebench.daemon._errors import ConfigError
from ssebench.daemon._pids import PidsWatchdog
from ssebench.daemon._users import Identity, current_identity, processes_of
from ssebench.daemon.entrypoint._agent import run_agent
from ssebench.daemon.entrypoint._procs import Children, Wakeup
from ssebench.daemon.entrypoint._settings import DEFAULT_TIMEOUT, START_TIMEOUT, Settings
from ssebench.spec import contract

START_FAILED: Final = 2
"""Exit status when the agent could not start: bad settings, or the checker never said go."""

GO_POLL: Final = 0.01
"""Seconds between two looks for the go file: the agent's first instruction waits on it."""

GO_WAIT: Final = 2 * START_TIMEOUT
"""Seconds the launcher waits for the go file (the checker's services get START_TIMEOUT)."""


def say(message: str) -> None:
    """One line of the launcher's own on the container's stderr."""
    sys.stderr.write(f"ssebench-launcher: {message}\n")
    sys.stderr.flush()


def recorded_command(path: Path) -> list[str]:
    """The agent's command the seal recorded in the image (`contract.AGENT_COMMAND_FILE`).

    Raises:
        ConfigError: it is missing (an image SSEBench did not seal), or not a non-empty
            JSON list of strings (no CMD in the agent's Dockerfile).
    """
    try:
        command = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(
            f"no agent command: {path} is missing (an agent image SSEBench did not seal)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"no agent command: {path} cannot be read: {exc}") from None
    if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
        raise ConfigError(
            f"no agent command: {path} holds no command (give the agent's Dockerfile a CMD)"
        )
    return command


def launcher_settings(
    argv: Sequence[str],
    environ: Mapping[str, str],
    command_file: Path = Path(contract.AGENT_COMMAND_FILE),
) -> Settings:
    """The agent's settings from the launcher's arguments (else the recorded command) and
    environment.

    Raises:
        ConfigError: no agent command, a bad `TIMEOUT`, or it runs as root.
    """
    if os.geteuid() == 0:
        raise ConfigError(
            "the agent container never runs root: start it as model (uid "
            f"{contract.MODEL_UID}), not as root"
        )
    return Settings(
        agent_command=list(argv) or recorded_command(command_file),
        timeout=parse_seconds(
            contract.ENV_TIMEOUT, environ.get(contract.ENV_TIMEOUT), DEFAULT_TIMEOUT
        ),
        keep_alive=environ.get(contract.ENV_KEEP_ALIVE, "").strip() in ("1", "true", "yes"),
        agent_socket=environ.get(contract.ENV_DAEMON_SOCKET) or contract.SIDECAR_DAEMON_SOCKET,
        model=current_identity(),
        environ=dict(environ),
    )


def wait_for_go(go: Path, wakeup: Wakeup, seconds: float) -> bool:
    """Whether the go file appeared within `seconds` (False also on a stop signal).

    Until the checker's daemon opens the sockets volume to others (0711) a look into
    it is refused: that too is "not yet".
    """
    end = time.monotonic() + seconds
    while not os.path.exists(go):  # noqa: PTH110 - False on any error, as wanted
        if wakeup.stopping or time.monotonic() >= end:
            return False
        wakeup.wait(GO_POLL)
    return True


def kill_the_rest() -> int:
    """SIGKILL every process of the container but this one, and say how many there were
    (PID 1 only: elsewhere, as in tests, `kill(-1)` would reach every process of the
    user, so nothing is done and 0 returned)."""
    if os.getpid() != 1:
        return 0
    found = len(processes_of(os.geteuid()))
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    return found


def end_the_rest(children: Children) -> None:
    """Kill every process of the container but this one (`kill_the_rest`), reap them, and
    say how many the agent left behind."""
    if os.getpid() == 1:
        killed = kill_the_rest()
        children.reap()
        if killed:
            say(f"killed {killed} process(es) it left behind")


def pids_watchdog(environ: Mapping[str, str], model: Identity) -> PidsWatchdog | None:
    """The watchdog of the run's process limit, started; None without a limit.

    Raises:
        ConfigError: `SSE_PIDS_LIMIT` is not a positive whole number.
    """
    limit = parse_pids_limit(environ.get(contract.ENV_PIDS_LIMIT))
    if limit is None:
        return None
    watchdog = PidsWatchdog(limit, say, [model], kill=lambda _who: kill_the_rest())
    watchdog.start()
    return watchdog


def stay_up(wakeup: Wakeup, children: Children) -> int:
    """SSE_KEEP_ALIVE=1: reap orphans until a stop signal; 128+N."""
    say(f"{contract.ENV_KEEP_ALIVE}=1: staying up until stopped")
    while not wakeup.stopping:
        children.reap()
        wakeup.wait(None)
    return 128 + (wakeup.stop_signal or signal.SIGTERM)


def main(argv: Sequence[str] | None = None, go: Path = Path(contract.AGENT_GO_FILE)) -> int:
    """Run the agent (see the module's docstring).

    Returns:
        The agent's status; 124 at its time limit; 128+N after stop signal N; 2 when it
        could not start.
    """
    command = list(sys.argv[1:] if argv is None else argv)
    cwd = str(Path.cwd())
    # The working directory is the agent's tree: nothing of it on the import path.
    sys.path[:] = [entry for entry in sys.path if entry not in ("", ".", cwd)]
    try:
        settings = launcher_settings(command, os.environ)
    except ConfigError as exc:
        say(f"refusing to start: {exc}")
        return START_FAILED
    wakeup = Wakeup()
    children = Children()
    if not wait_for_go(go, wakeup, GO_WAIT):
        if wakeup.stopping:
            return 128 + (wakeup.stop_signal or signal.SIGTERM)
        say(f"the checker did not let the agent start within {GO_WAIT:g} s ({go} is missing)")
        return START_FAILED
    try:
        watchdog = pids_watchdog(os.environ, settings.model)
    except ConfigError as exc:
        say(f"refusing to start: {exc}")
        return START_FAILED
    outcome = run_agent(
        settings, children, wakeup, cwd=cwd, log=sys.stdout.fileno(), out=None, say=say
    )
    if watchdog is not None:
        watchdog.stop()
    end_the_rest(children)
    code = outcome.exit_code
    if code is None:
        code = 128 + (wakeup.stop_signal or signal.SIGTERM)
    sys.stderr.write(f"{contract.AGENT_EXIT_LINE}{code}\n")
    sys.stderr.flush()
    if settings.keep_alive and not wakeup.stopping:
        return stay_up(wakeup, children)
    return code
