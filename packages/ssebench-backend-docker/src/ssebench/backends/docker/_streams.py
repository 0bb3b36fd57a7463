"""Relaying a container's output to this process's stdout and stderr as it is written.

Integrity rule (docs/integrity.md, "What reaches the host is tamed": output capped
with a marker, control characters stripped before a terminal): each stream
goes through `ssebench.spec.terminal.TerminalFilter`, so no escape sequence
or other control character the agent printed reaches the user's terminal,
and at most `RELAY_LIMIT` bytes of it do; the rest is read and dropped (the
engine must never wait for us), and one marker line says how much.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import BinaryIO, Final

import docker
from ssebench.backends.docker._errors import engine_errors
from ssebench.spec import SSEBenchError, contract
from ssebench.spec.terminal import TerminalFilter

RELAY_LIMIT: Final = contract.AGENT_OUTPUT_LIMIT + 1024 * 1024
"""Bytes of each of the container's streams shown: the entrypoint's own cap on what it
relays, plus room for its own lines and its marker."""

# Output plumbing, not run state: a relay belongs to the process that started
# the run and ends with the container; `wait` joins it so no last line is lost.
_relays: dict[str, threading.Thread] = {}


def _show(stream: BinaryIO, text: str) -> None:
    if text:
        stream.write(text.encode("utf-8", errors="replace"))
        stream.flush()


def _pump(chunks: Iterator[tuple[bytes | None, bytes | None]], limit: int = RELAY_LIMIT) -> None:
    out: BinaryIO = sys.stdout.buffer
    err: BinaryIO = sys.stderr.buffer
    streams = ((out, TerminalFilter(limit)), (err, TerminalFilter(limit)))
    try:
        with engine_errors("relaying a run's output"):
            for chunk in chunks:
                for data, (stream, safe) in zip(chunk, streams, strict=True):
                    if data:
                        _show(stream, safe.feed(data))
        for stream, safe in streams:
            _show(stream, safe.finish())
    except (SSEBenchError, OSError, ValueError):
        # The engine or our own stdout went away: the run goes on regardless.
        return


def start_relay(client: docker.DockerClient, container_id: str) -> None:
    """Attach to the container's output (before it starts, so nothing is missed) and relay it."""
    with engine_errors(f"attaching to container {container_id[:12]}"):
        chunks = client.api.attach(
            container_id, stdout=True, stderr=True, stream=True, logs=True, demux=True
        )
    name = f"relay-{container_id[:12]}"
    relay = threading.Thread(target=_pump, args=(chunks,), name=name, daemon=True)
    relay.start()
    _relays[container_id] = relay


def join_relay(container_id: str, timeout: float = 5.0) -> None:
    """Let the relay write the container's last output, if this process started one."""
    relay = _relays.pop(container_id, None)
    if relay is not None:
        relay.join(timeout)


def split_lines(chunks: Iterator[bytes]) -> Iterator[str]:
    """Whole lines (without their newline) out of a stream of byte chunks."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", errors="replace")
    if pending:
        yield pending.decode("utf-8", errors="replace")
