"""The task container's supervisor: the daemon, its log, signals and orphans.

As PID 1 it reaps every orphan (the checks' processes are the daemon's
grandchildren), passes a stop signal on to the daemon, kills it when it has
not ended `SERVICE_STOP_WAIT` seconds later, and exits 128+N after signal N,
else with the daemon's status. The daemon's output goes to `daemon.log` in the
results directory, as in sandbox mode, and its start and end to the container's
output. With `SSE_PIDS_LIMIT` it holds the container to the run's process limit
where the kernel does not (`ssebench.daemon._pids`: the checks and the agent's
shell run here), and says how in both. It imports only the standard library and
the entrypoint's helpers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Final

from ssebench.daemon._environ import parse_pids_limit
from ssebench.daemon._errors import ConfigError
from ssebench.daemon._pids import PidsWatchdog, run_users
from ssebench.daemon._users import lower_own_oom_score, signal_group
from ssebench.daemon.entrypoint._files import open_log, prepare_results
from ssebench.daemon.entrypoint._main import isolate
from ssebench.daemon.entrypoint._services import service_env
from ssebench.daemon.entrypoint._settings import SERVICE_STOP_WAIT
from ssebench.spec import contract

START_FAILED: Final = 2
"""Exit status when the daemon could not be started."""


def say(message: str) -> None:
    """One line of the supervisor's own on the container's stderr."""
    sys.stderr.write(f"ssebench-sidecar: {message}\n")
    sys.stderr.flush()


def daemon_argv() -> list[str]:
    """How the daemon is started: isolated, as every SSEBench process."""
    return [sys.executable, "-I", "-m", "ssebench.daemon"]


class _Supervisor:
    def __init__(self) -> None:
        self.pid: int | None = None
        self.stop_signal: int | None = None

    def on_stop(self, signum: int, _frame: FrameType | None) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum
            signal.alarm(max(1, round(SERVICE_STOP_WAIT)))
        self._signal(signal.SIGTERM)

    def on_alarm(self, _signum: int, _frame: FrameType | None) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self.pid is not None:
            signal_group(self.pid, signum)

    def run(self, argv: Sequence[str], environ: Mapping[str, str]) -> int:
        results = Path(environ.get(contract.ENV_RESULTS) or contract.RESULTS_DIR)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.on_stop)
        signal.signal(signal.SIGALRM, self.on_alarm)
        try:
            limit = parse_pids_limit(environ.get(contract.ENV_PIDS_LIMIT))
        except ConfigError as exc:
            say(f"refusing to start: {exc}")
            return START_FAILED
        try:
            prepare_results(results)
            log = open_log(results, "daemon.log")
        except OSError as exc:
            say(f"cannot prepare the results directory {results}: {exc}")
            return START_FAILED
        if (oom := lower_own_oom_score()) is not None:  # before the supervised program starts
            self._log(log, oom)
        watchdog = None
        try:
            if limit is not None:
                watchdog = PidsWatchdog(limit, lambda line: self._log(log, line), run_users())
                watchdog.start()
            try:
                proc = subprocess.Popen(
                    list(argv),
                    env=service_env(environ),
                    cwd="/",
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as exc:
                say(f"cannot start the daemon: {exc}")
                return START_FAILED
            self.pid = proc.pid
            say(f"daemon started: pid {proc.pid}, its log in daemon.log")
            if self.stop_signal is not None:  # a signal before the pid was known
                self._signal(signal.SIGTERM)
            code = self._reap_until(proc.pid)
            say(f"daemon ended: status {code}")
            return 128 + self.stop_signal if self.stop_signal is not None else code
        finally:
            if watchdog is not None:
                watchdog.stop()
            os.close(log)

    @staticmethod
    def _log(log: int, line: str) -> None:
        """A line of the supervisor's own on the container's stderr and in daemon.log."""
        say(line)
        with contextlib.suppress(OSError):
            os.write(log, f"ssebench-sidecar: {line}\n".encode("utf-8", errors="replace"))

    @staticmethod
    def _reap_until(pid: int) -> int:
        """Reap every child and orphan until the daemon has ended; its exit status."""
        while True:
            try:
                found, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return 1
            if found == pid:
                return os.waitstatus_to_exitcode(status)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the daemon until it ends or the container is stopped.

    Args:
        argv: the daemon's command (default: `python -I -m ssebench.daemon`).

    Returns:
        128+N after stop signal N (143: SIGTERM); the daemon's status when it
        ended by itself; 2 when it could not start.
    """
    isolate()
    return _Supervisor().run(list(argv) if argv else daemon_argv(), os.environ)
