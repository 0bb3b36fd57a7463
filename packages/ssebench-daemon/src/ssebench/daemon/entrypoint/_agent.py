"""The agent phase: the agent command as `model`, its output relayed, its time limit kept.

The agent runs in its own session with stdin closed and an environment built
for it (never the admin socket, never the SSEBench runtime on PATH). Its
output goes to `agent.log` and to the container's output, up to
`contract.AGENT_OUTPUT_LIMIT` bytes (see `Relay`). At the time limit,
on a stop signal, and also when it simply exits, its process group is
killed and then every process of `model` (background jobs, daemons that
called setsid): nothing of the agent survives the phase.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from ssebench.daemon._users import Identity, child_env, kill_user, killable_as, signal_group
from ssebench.daemon.entrypoint._procs import Children, Wakeup
from ssebench.daemon.entrypoint._settings import AGENT_ENV_PASSED, Settings
from ssebench.spec import contract

_CHUNK: Final = 65536


def agent_env(environ: Mapping[str, str], model: Identity, agent_socket: str) -> dict[str, str]:
    """The agent's environment: `child_env` (what it strips, and why, is listed there)
    with the run's variables an agent needs (`AGENT_ENV_PASSED`), the agent socket,
    and the archive folder.
    """
    env = child_env(environ, model, keep=AGENT_ENV_PASSED)
    env[contract.ENV_DAEMON_SOCKET] = agent_socket
    env.setdefault(contract.ENV_ARCHIVE, contract.ARCHIVE_DIR)
    return env


@dataclass
class AgentOutcome:
    """How the agent phase ended."""

    exit_code: int | None
    """The agent's status (124 at its time limit; None when a stop signal ended it)."""

    duration: float
    timed_out: bool = False
    stopped: bool = False
    killed: int = 0
    """How many `model` processes were still alive when the phase ended."""


class Relay:
    """Copies a child's output to its log and to the container's output, capped.

    Integrity rule (docs/integrity.md, "What reaches the host is tamed": output
    capped with a marker): the first `limit` bytes reach the log and the
    container's output (the engine's log, the CLI); the rest is still read,
    so the writer never blocks on a full pipe, but dropped, and `finish`
    writes one marker line (`contract.output_cap_line`) to both saying how
    much. Used for the agent and for the evaluator, whose output names files
    of the agent's tree.
    """

    def __init__(
        self, pipe: int, log: int, out: int | None, limit: int = contract.AGENT_OUTPUT_LIMIT
    ) -> None:
        self.pipe = pipe
        self.log = log
        self.out = out
        self.limit = limit
        self.open = True
        self.passed = 0
        self.dropped = 0
        self._ends_line = True

    def pump(self) -> None:
        """Copy what is readable now (as far as the cap allows); notice the end of the output."""
        try:
            data = os.read(self.pipe, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.open = False
            return
        room = max(0, self.limit - self.passed)
        if len(data) > room:
            self.dropped += len(data) - room
            data = data[:room]
        if not data:
            return
        self.passed += len(data)
        self._ends_line = data.endswith(b"\n")
        self._write(data)

    def _write(self, data: bytes) -> None:
        _write_all(self.log, data)
        if self.out is not None:
            try:
                _write_all(self.out, data)
            except OSError:  # the container's output is gone: keep the log
                self.out = None

    def drain(self, wakeup: Wakeup, seconds: float) -> None:
        """Copy what is left, for at most `seconds` (a surviving writer cannot hold us)."""
        end = time.monotonic() + seconds
        while self.open and time.monotonic() < end:
            if wakeup.wait(end - time.monotonic(), [self.pipe]):
                self.pump()

    def finish(self) -> None:
        """Write the marker line if output was dropped (call once, after the last `pump`)."""
        if self.dropped:
            line = contract.output_cap_line(self.limit, self.dropped)
            self._write((line if self._ends_line else "\n" + line).encode())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


Say = Callable[[str], None]


class Beside(Protocol):
    """Processes watched from the agent's loop (the `on-agent` plugins)."""

    def fds(self) -> list[int]:
        """Their output pipes."""
        ...

    def service(self, readable: Sequence[int] = ()) -> None:
        """Copy what is readable; kill each one past its time limit."""
        ...

    def end_beside(self, why: str) -> None:
        """End them all: the phase they ran beside is over."""
        ...


def _report(out: int | None, log: int, text: str) -> None:
    data = text.encode()
    _write_all(log, data)
    if out is not None:
        with contextlib.suppress(OSError):
            _write_all(out, data)


def _status(returncode: int) -> int:
    """A process's returncode as a shell shows it (128+N for signal N)."""
    return 128 - returncode if returncode < 0 else returncode


def run_agent(
    settings: Settings,
    children: Children,
    wakeup: Wakeup,
    *,
    cwd: str,
    log: int,
    out: int | None,
    say: Say,
    beside: Beside | None = None,
) -> AgentOutcome:
    """Run the agent command as `model` until it exits, its time limit, or a stop signal.

    Args:
        settings: the command, time limit, account and environment.
        children: the entrypoint's children (the agent becomes one).
        wakeup: signals; a stop signal ends the phase early.
        cwd: the agent's working directory (the task's source tree).
        log: agent.log, open for writing.
        out: the container's output (None: the log only).
        say: the entrypoint's own messages.
        beside: the `on-agent` plugins, already started: watched in the agent's loop
            and ended with the phase, before every process of `model` is killed.

    Returns:
        How the phase ended; by then no process of `model` is left.
    """
    model = settings.model
    # As root, the agent drops to model; as model (the launcher) it stays. Either way it
    # is the first the OOM killer picks, and the lowest on the CPU beside the watchdog.
    as_root = os.geteuid() == 0
    mine = as_root or os.geteuid() == model.uid
    user: dict[str, object] = dict(killable_as(model)) if mine else {}
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    os.set_blocking(read_fd, False)
    started = time.monotonic()
    try:
        proc = children.spawn(
            settings.agent_command,
            cwd=cwd,
            env=agent_env(settings.environ, model, settings.agent_socket),
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
            close_fds=True,
            umask=0o022,
            **user,
        )
    except OSError as exc:
        os.close(write_fd)
        os.close(read_fd)
        _report(
            out,
            log,
            f"ssebench: cannot start the agent command "
            f"{settings.agent_command[0]!r}: {exc.strerror or exc}\n",
        )
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        return AgentOutcome(exit_code=code, duration=time.monotonic() - started)
    os.close(write_fd)
    say(
        f"agent started as {model.name} in {cwd}: pid {proc.pid}, time limit {settings.timeout:g} s"
    )
    relay = Relay(read_fd, log, out)
    deadline = started + settings.timeout
    timed_out = False
    while True:
        children.reap()
        if proc.returncode is not None or wakeup.stopping:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        others = beside.fds() if beside is not None else []
        readable = wakeup.wait(min(left, 1.0), ([read_fd] if relay.open else []) + others)
        if read_fd in readable:
            relay.pump()
        if beside is not None:
            beside.service(readable)
    duration = time.monotonic() - started
    if beside is not None:
        beside.end_beside("the agent phase ended")
    signal_group(proc.pid, signal.SIGKILL)
    killed = 0
    if as_root:
        try:
            killed = kill_user(model, between=children.reap)
        except RuntimeError as exc:  # e.g. a process stuck in the kernel: say so, go on
            say(f"cannot end every process of {model.name}: {exc}")
    children.wait(proc, 5.0, wakeup)
    relay.drain(wakeup, 2.0)
    relay.finish()
    os.close(read_fd)
    if timed_out:
        status = contract.TIMEOUT_EXIT
        say(f"agent stopped at its time limit ({settings.timeout:g} s): exit status {status}")
        return AgentOutcome(exit_code=status, duration=duration, timed_out=True, killed=killed)
    if wakeup.stopping and (proc.returncode is None or proc.returncode == -signal.SIGKILL):
        say(f"agent stopped by signal {wakeup.stop_signal} after {duration:.1f} s")
        return AgentOutcome(exit_code=None, duration=duration, stopped=True, killed=killed)
    assert proc.returncode is not None
    code = _status(proc.returncode)
    say(
        f"agent exited with status {code} after {duration:.1f} s"
        + (f"; killed {killed} process(es) it left behind" if killed else "")
    )
    return AgentOutcome(exit_code=code, duration=duration, killed=killed)
