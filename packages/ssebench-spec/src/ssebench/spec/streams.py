"""Lines of several output streams, as each comes: a run's two containers shown as one."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from ssebench.spec._errors import SSEBenchError


def merge_lines(streams: list[Iterator[str]]) -> Iterator[str]:
    """The lines of several streams as each comes, until all have ended."""
    lines: queue.Queue[str | None] = queue.Queue(maxsize=1024)

    def pump(stream: Iterator[str]) -> None:
        try:
            for line in stream:
                lines.put(line)
        except (SSEBenchError, OSError, ValueError):
            pass
        finally:
            lines.put(None)

    for stream in streams:
        threading.Thread(target=pump, args=(stream,), daemon=True).start()
    open_streams = len(streams)
    while open_streams:
        line = lines.get()
        if line is None:
            open_streams -= 1
        else:
            yield line
