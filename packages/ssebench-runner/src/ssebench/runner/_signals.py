"""SIGINT and SIGTERM while a run is watched: the first stops the run, the second ends the CLI."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, Final, TypeAlias

HANDLED: Final = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a run."""

_Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | None


def signal_name(signum: int) -> str:
    """`SIGINT`, `SIGTERM`, ... for a signal number."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class SecondSignal(BaseException):
    """A second SIGINT or SIGTERM arrived: end the CLI now.

    A BaseException, like KeyboardInterrupt, so that handlers of ordinary
    errors let it through.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"a second {signal_name(signum)}")
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """The status a shell expects of a process ended by this signal: 128 + its number."""
        return 128 + self.signum


class StopOnSignal:
    """While entered, the first SIGINT or SIGTERM calls `on_first`; the next raises SecondSignal.

    `on_first` runs inside the signal handler, in the main thread, so it must
    return quickly (start a thread for slow work). Handlers can only be
    installed from the main thread; elsewhere this does nothing, and signals
    keep their usual effect. The previous handlers come back on exit, and
    already when the second signal arrives, so a third one is not caught.
    """

    def __init__(self, on_first: Callable[[int], None]) -> None:
        """Catch the run-stopping signals while entered.

        Args:
            on_first: called with the signal's number the first time one arrives.
        """
        self._on_first = on_first
        self._previous: dict[int, _Handler] = {}
        self.received: int | None = None
        """The first signal that arrived, if any."""

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for signum in HANDLED:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._restore()

    def _restore(self) -> None:
        while self._previous:
            signum, previous = self._previous.popitem()
            signal.signal(signum, previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
            self._on_first(signum)
            return
        self._restore()
        raise SecondSignal(signum)
