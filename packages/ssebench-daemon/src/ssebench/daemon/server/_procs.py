"""Starting processes as another user and capping their output; the daemon's process killer.

Every child gets an environment from `ssebench.daemon._users.child_env`: never
anything pointing into the SSEBench runtime (`/opt/ssebench`) or at the admin
socket, never an SSEBench secret. Children run in their own session, with no
supplementary groups.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from typing_extensions import override

from ssebench.daemon._users import (
    DEFAULT_PATH,
    Identity,
    as_user,
    kill_user,
    killable_as,
    signal_group,
)


class CappedBuffer:
    """Keeps the first `limit` bytes written to it and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._parts: list[bytes] = []
        self._kept = 0
        self.dropped = 0

    def write(self, data: bytes) -> None:
        """Keep what fits, count what does not."""
        room = self.limit - self._kept
        if room > 0:
            part = data[:room]
            self._parts.append(part)
            self._kept += len(part)
        self.dropped += max(0, len(data) - max(room, 0))

    @property
    def truncated(self) -> bool:
        """Whether anything was dropped."""
        return self.dropped > 0

    def getvalue(self) -> bytes:
        """What was kept."""
        return b"".join(self._parts)

    def text(self) -> str:
        """What was kept, decoded (invalid UTF-8 replaced)."""
        return self.getvalue().decode("utf-8", errors="replace")


@dataclass
class RunOutput:
    """How a child ended and what it printed (capped)."""

    argv: list[str]
    code: int
    stdout: CappedBuffer
    stderr: CappedBuffer
    timed_out: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    runnable: bool = True
    """False when the program itself could not be executed (not its working directory)."""

    @property
    def truncated(self) -> bool:
        """Whether either stream lost output."""
        return self.stdout.truncated or self.stderr.truncated


DataSink = Callable[[bytes], None]


class _ChildProtocol(asyncio.SubprocessProtocol):
    """Hands output to sinks as it arrives and notices the exit apart from the pipes
    (a child that escaped into its own session may hold them open for ever)."""

    def __init__(self, sinks: dict[int, DataSink], on_eof: Callable[[int], None] | None) -> None:
        loop = asyncio.get_running_loop()
        self.sinks = sinks
        self.on_eof = on_eof
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: dict[int, asyncio.Future[None]] = {fd: loop.create_future() for fd in sinks}

    @override
    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        self.sinks[fd](bytes(data))

    @override
    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd in self.closed and not self.closed[fd].done():
            self.closed[fd].set_result(None)
            if self.on_eof is not None:
                self.on_eof(fd)

    @override
    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


class Child:
    """A started process: its pid, its exit, its stdin."""

    def __init__(self, transport: asyncio.SubprocessTransport, protocol: _ChildProtocol) -> None:
        self.transport = transport
        self.protocol = protocol
        self.pid = transport.get_pid()

    @property
    def returncode(self) -> int | None:
        """The exit status (-signal when killed), None while running."""
        return self.transport.get_returncode()

    async def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit (not for the pipes).

        Raises:
            TimeoutError: still running after `timeout` seconds.
        """
        await asyncio.wait_for(asyncio.shield(self.protocol.exited), timeout)
        code = self.returncode
        assert code is not None
        return code

    async def output_closed(self, timeout: float) -> bool:
        """Wait up to `timeout` for every output pipe to close; whether they did."""
        try:
            await asyncio.wait_for(asyncio.gather(*self.protocol.closed.values()), timeout)
        except TimeoutError:
            return False
        return True

    def write(self, data: bytes) -> None:
        """Write to the child's stdin (buffered; a closed pipe is ignored)."""
        pipe = self.transport.get_pipe_transport(0)
        if pipe is not None and not pipe.is_closing():
            assert isinstance(pipe, asyncio.WriteTransport)
            pipe.write(data)

    def close_stdin(self) -> None:
        """Close the child's stdin."""
        pipe = self.transport.get_pipe_transport(0)
        if pipe is not None:
            pipe.close()

    def kill(self) -> None:
        """SIGKILL the child's process group."""
        if self.returncode is None:
            signal_group(self.pid, signal.SIGKILL)

    def close(self) -> None:
        """Stop listening to the child's pipes (kills it if it still runs)."""
        self.transport.close()


async def start(
    argv: Sequence[str],
    *,
    identity: Identity,
    cwd: Path | str,
    env: Mapping[str, str],
    stdout: DataSink,
    stderr: DataSink,
    on_eof: Callable[[int], None] | None = None,
    stdin: bool = False,
    umask: int = 0o022,
) -> Child:
    """Start `argv` as `identity` in a new session with no supplementary groups.

    Any identity but root's (the checks' sse-runner, the shell's model) starts
    as the first process the OOM killer picks (`killable_as`).

    Raises:
        OSError: the program cannot be started.
    """
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: _ChildProtocol({1: stdout, 2: stderr}, on_eof),
        *argv,
        cwd=str(cwd),
        env=dict(env),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        umask=umask,
        close_fds=True,
        **(as_user(identity) if identity.uid == 0 else killable_as(identity)),
    )
    return Child(transport, protocol)


async def run(
    argv: Sequence[str],
    *,
    identity: Identity,
    cwd: Path | str,
    env: Mapping[str, str],
    timeout: float | None,
    limit: int,
    stdin: bytes | None = None,
    umask: int = 0o022,
) -> RunOutput:
    """Run `argv` as `identity` in its own session, capturing capped output.

    Output is read as it comes; past `limit` bytes per stream it is dropped.
    At the time limit the child's process group is killed; the caller kills
    whatever else of the user survived (see `ProcessKiller`).

    Returns:
        The exit status (-signal when killed by one), output and timing.

    Raises:
        OSError: the program cannot be started.
    """
    started = time.monotonic()
    out, err = CappedBuffer(limit), CappedBuffer(limit)
    child = await start(
        argv,
        identity=identity,
        cwd=cwd,
        env=env,
        stdout=out.write,
        stderr=err.write,
        stdin=stdin is not None,
        umask=umask,
    )
    try:
        if stdin is not None:
            child.write(stdin)
            child.close_stdin()
        timed_out = False
        try:
            code = await child.wait(timeout)
        except TimeoutError:
            timed_out = True
            child.kill()
            code = await child.wait()
        # A child that escaped into its own session may hold the pipes: stop reading then.
        await child.output_closed(1.0)
    finally:
        child.kill()
        child.close()
    return RunOutput(
        argv=list(argv),
        code=code,
        stdout=out,
        stderr=err,
        timed_out=timed_out,
        seconds=time.monotonic() - started,
    )


class ProcessKiller(Protocol):
    """Kills every process of one user."""

    async def kill_all(self, who: Identity) -> int:
        """SIGKILL every process running as `who` (including ones that called setsid or
        double-forked) and return once none is left.

        Returns:
            How many processes were found alive.
        """
        ...


class UidKiller:
    """Kills a user's processes by uid (`ssebench.daemon._users.kill_user`, in a thread).

    Never used for root or for the daemon's own user.
    """

    def __init__(self, *, rounds: int = 200) -> None:
        self.rounds = rounds

    async def kill_all(self, who: Identity) -> int:
        """See `ProcessKiller.kill_all`.

        Raises:
            ValueError: `who` is root or the daemon's own user.
            RuntimeError: processes are still alive after every round.
        """
        return await asyncio.to_thread(kill_user, who, rounds=self.rounds)


_READ_FILE: Final = (
    "import sys\n"
    "try:\n"
    "    f = open(sys.argv[1], 'rb')\n"
    "except FileNotFoundError:\n"
    "    sys.exit(3)\n"
    "with f:\n"
    "    sys.stdout.buffer.write(f.read())\n"
)


async def read_as(identity: Identity, path: Path, *, limit: int) -> bytes | None:
    """Read a file with `identity`'s permissions (for paths the agent controls).

    Returns:
        The contents (at most `limit` bytes), or None when the file does not exist.

    Raises:
        PermissionError: `identity` may not read it.
        OSError: another failure.
    """
    result = await run(
        [sys.executable, "-I", "-S", "-c", _READ_FILE, str(path)],
        identity=identity,
        cwd="/",
        env={"PATH": DEFAULT_PATH},
        timeout=30,
        limit=limit,
    )
    if result.code == 3:
        return None
    if result.code != 0:
        message = result.stderr.text().strip().splitlines()
        raise PermissionError(f"cannot read {path}: {message[-1] if message else result.code}")
    return result.stdout.getvalue()
