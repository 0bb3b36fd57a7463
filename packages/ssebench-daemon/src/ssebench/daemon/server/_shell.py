"""The `bash` tool: one persistent shell as `model` in the source tree.

Each command is handed to the shell quoted as `$'…'` and run with `eval`, so
`cd`, `export` and shell variables persist between commands; its stdin is
/dev/null. A random marker printed after it on both streams ends its output
and carries its exit status. A shell that exits or times out is replaced by a
fresh one with the next command — until `close`, at the end of the agent phase:
from then on no shell starts again, whoever asks (docs/integrity.md: no code of the
agent runs after the agent phase except inside a check, as sse-runner).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ssebench.daemon._errors import BadRequestError, ForbiddenError
from ssebench.daemon._users import Identity, clean_path
from ssebench.daemon.server._procs import CappedBuffer, Child, RunOutput, start

_SAFE: Final = frozenset(
    b'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-+=.,:/@%^&*()[]{}<>|;~#!?"`$'
)
_CHUNK: Final = 65536


def ansi_c_quote(command: str) -> str:
    """`command` as a bash `$'…'` word (every byte but plain ones escaped as \\xHH).

    Raises:
        BadRequestError: the command holds a NUL character, which bash cannot take.
    """
    data = command.encode("utf-8", errors="surrogateescape")
    if b"\0" in data:
        raise BadRequestError("the command holds a NUL character")
    return "$'" + "".join(chr(b) if b in _SAFE else f"\\x{b:02x}" for b in data) + "'"


class _Stream:
    """One of the shell's output pipes, read up to each command's marker."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.leftover = b""

    async def read_to(self, marker: bytes, sink: CappedBuffer) -> bytes | None:
        """Copy output into `sink` up to `marker`.

        Returns:
            The rest of the marker's line, or None when the stream ended first.
        """
        pending, self.leftover = self.leftover, b""
        keep = len(marker) - 1
        while True:
            index = pending.find(marker)
            if index >= 0:
                sink.write(pending[:index])
                rest = pending[index + len(marker) :]
                while b"\n" not in rest:
                    more = await self.reader.read(_CHUNK)
                    if not more:
                        return rest
                    rest += more
                line, _, self.leftover = rest.partition(b"\n")
                return line
            cut = max(0, len(pending) - keep)
            sink.write(pending[:cut])
            pending = pending[cut:]
            chunk = await self.reader.read(_CHUNK)
            if not chunk:
                sink.write(pending)
                return None
            pending += chunk


class Shell:
    """A persistent bash as one user; `execute` runs one command at a time."""

    def __init__(
        self, *, identity: Identity, cwd: Path, env: Mapping[str, str], limit: int
    ) -> None:
        self.identity = identity
        self.cwd = cwd
        self.env = dict(env)
        self.env.setdefault("PAGER", "cat")
        self.env.setdefault("GIT_PAGER", "cat")
        self.limit = limit
        self.lock = asyncio.Lock()
        self._child: Child | None = None
        self._out: _Stream | None = None
        self._err: _Stream | None = None
        self.closed = False
        """Set by `close`: no shell starts again."""

    @property
    def pid(self) -> int | None:
        """The running shell's pid, if any."""
        child = self._child
        return child.pid if child is not None and child.returncode is None else None

    def _refuse_if_closed(self) -> None:
        if self.closed:
            raise ForbiddenError(
                "the agent phase is over: the shell is closed", code="agent_phase_over"
            )

    async def _start(self) -> tuple[Child, _Stream, _Stream]:
        self._refuse_if_closed()
        if self._child is not None and self._child.returncode is None:
            assert self._out is not None and self._err is not None
            return self._child, self._out, self._err
        self._discard()
        bash = shutil.which("bash", path=clean_path(self.env.get("PATH"))) or "/bin/bash"
        readers = {1: asyncio.StreamReader(), 2: asyncio.StreamReader()}
        self._child = await start(
            [bash, "--noprofile", "--norc"],
            identity=self.identity,
            cwd=self.cwd,
            env=dict(self.env, PWD=str(self.cwd)),
            stdout=readers[1].feed_data,
            stderr=readers[2].feed_data,
            on_eof=lambda fd: readers[fd].feed_eof(),
            stdin=True,
        )
        self._out, self._err = _Stream(readers[1]), _Stream(readers[2])
        return self._child, self._out, self._err

    async def execute(self, command: str, *, timeout: float) -> RunOutput:
        """Run one command in the shell.

        Returns:
            Its exit status (-1 when stopped at the time limit; the shell's own
            status when the command ended the shell) and capped output.

        Raises:
            BadRequestError: the command cannot be given to bash (a NUL character).
            ForbiddenError: the shell was closed, before or while the command ran.
            OSError: bash cannot be started.
        """
        quoted = ansi_c_quote(command)
        async with self.lock:
            child, out, err = await self._start()
            marker = f"__SSE_{secrets.token_hex(16)}__"
            script = (
                f"__sse_cmd={quoted}\n"
                'eval "$__sse_cmd" < /dev/null\n'
                f"__sse_rc=$?; unset __sse_cmd; printf '\\n%s %d\\n' {marker} \"$__sse_rc\"; "
                f"printf '\\n%s\\n' {marker} >&2; unset __sse_rc\n"
            )
            started = time.monotonic()
            stdout, stderr = CappedBuffer(self.limit), CappedBuffer(self.limit)
            result = RunOutput(argv=["bash", "-c", command], code=-1, stdout=stdout, stderr=stderr)
            child.write(script.encode())
            tail = f"\n{marker}".encode()
            reading = asyncio.gather(out.read_to(tail + b" ", stdout), err.read_to(tail, stderr))
            try:
                status, _ = await asyncio.wait_for(reading, timeout)
            except TimeoutError:
                result.timed_out = True
                stderr.write(
                    f"\nssebench: the command was stopped after {timeout:g} s; "
                    "the shell starts afresh with the next command\n".encode()
                )
                await self.stop()
            else:
                if status is not None:
                    with contextlib.suppress(ValueError):
                        result.code = int(status.strip() or b"-1")
                else:
                    result.code = await self._ended(child)
                    stderr.write(
                        f"\nssebench: the shell exited with status {result.code}; the next "
                        f"command starts a new one in {self.cwd}\n".encode()
                    )
            result.seconds = time.monotonic() - started
            # Closed under the command: its answer says so, not that the shell died.
            self._refuse_if_closed()
            return result

    async def _ended(self, child: Child) -> int:
        try:
            code = await child.wait(5)
        except TimeoutError:
            code = -1
        await self.stop()
        return code

    def _discard(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.kill()
            child.close()

    async def close(self) -> None:
        """Stop the shell for good: no command starts one again."""
        self.closed = True
        await self.stop()

    async def stop(self) -> None:
        """Kill the shell and its process group (children that left the group survive)."""
        child = self._child
        self._discard()
        if child is not None:
            with contextlib.suppress(TimeoutError):
                await child.wait(5)
