"""Processes as PID 1 sees them: signals, children and orphans.

The entrypoint is single-threaded. Signals (SIGTERM, SIGINT, SIGCHLD) only
set a flag and wake `Wakeup.wait` through a pipe, so every wait in the
entrypoint is a `select` that returns on a signal, on output, or at a
deadline. As PID 1 it reaps every orphan: `Children.reap` collects the
status of its own children and discards the others'.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any, Final

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""Signals that stop the run."""


class Wakeup:
    """Turns signals into readable bytes on a pipe, and remembers a stop request."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.stop_signal: int | None = None
        self._previous_fd = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        self._previous: dict[int, Any] = {}
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._on_stop)
        # A Python-level handler makes SIGCHLD reach the wakeup pipe (SIG_DFL would not).
        self._previous[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, self._on_child)

    def _on_stop(self, signum: int, _frame: FrameType | None) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum

    def _on_child(self, _signum: int, _frame: FrameType | None) -> None:
        pass

    @property
    def stopping(self) -> bool:
        """Whether a stop signal arrived."""
        return self.stop_signal is not None

    def wait(self, timeout: float | None, fds: Sequence[int] = ()) -> list[int]:
        """Block until a signal, readable output on `fds`, or `timeout` seconds.

        Returns:
            Which of `fds` are readable.
        """
        if timeout is not None:
            timeout = max(0.0, timeout)
        try:
            readable, _, _ = select.select([self.read_fd, *fds], [], [], timeout)
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for safety
            readable = []
        if self.read_fd in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(self.read_fd, 512):
                    pass
        return [fd for fd in readable if fd != self.read_fd]

    def close(self) -> None:
        """Restore the previous handlers and close the pipe."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._previous_fd)
        os.close(self.read_fd)
        os.close(self.write_fd)


def exit_code(status: int) -> int:
    """A wait status as an exit code: the code, or -N when signal N killed the process."""
    return os.waitstatus_to_exitcode(status)


class Children:
    """The entrypoint's own children; `reap` also collects orphans (as PID 1)."""

    def __init__(self) -> None:
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def spawn(self, argv: Sequence[str], **popen: Any) -> subprocess.Popen[bytes]:
        """Start a child and remember it (Popen arguments as given).

        Raises:
            OSError: the program cannot be started.
        """
        proc: subprocess.Popen[bytes] = subprocess.Popen(list(argv), **popen)
        self._procs[proc.pid] = proc
        return proc

    def reap(self) -> None:
        """Collect every child that ended: ours get their status, orphans are discarded."""
        for proc in list(self._procs.values()):
            if proc.returncode is None:
                proc.poll()
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self._procs.get(pid)
            if child is not None and child.returncode is None:
                child.returncode = exit_code(status)

    def wait(self, proc: subprocess.Popen[bytes], timeout: float, wakeup: Wakeup) -> int | None:
        """Wait for a child to end (signals wake it, but do not cut it short).

        Returns:
            Its exit code, or None when it is still running after `timeout`.
        """
        deadline = time.monotonic() + timeout
        while True:
            self.reap()
            if proc.returncode is not None:
                return proc.returncode
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            wakeup.wait(min(left, 0.05))
