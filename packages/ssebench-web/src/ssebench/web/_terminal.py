"""The terminal: a shell in a running run's container, with a pty, over a WebSocket.

The shell is the backend's `exec_argv` command, run here on a pseudo-terminal
whose other end the page's xterm.js draws. Binary frames carry the terminal's
bytes both ways; a text frame `{"cols": C, "rows": R}` resizes it. Before the
shell starts, the run is marked touched (`summary.json` `touched`): a shell that
cannot be recorded is not opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import struct
import subprocess
import termios
from pathlib import Path
from typing import Final

from starlette.websockets import WebSocket, WebSocketDisconnect

from ssebench.spec.touched import mark_touched

DEFAULT_USER: Final = "model"
"""Whom the shell runs as unless the page asks otherwise: the agent's own user."""

SHELL: Final = ("/bin/bash", "-l")
READ_SIZE: Final = 1 << 16


def _take_terminal() -> None:
    # In the child, after setsid: make the pty its controlling terminal so that
    # resizing it sends SIGWINCH to the exec client (which forwards the size).
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _resize(descriptor: int, cols: int, rows: int) -> None:
    size = struct.pack("HHHH", max(1, min(rows, 1000)), max(1, min(cols, 1000)), 0, 0)
    fcntl.ioctl(descriptor, termios.TIOCSWINSZ, size)


async def refuse_terminal(socket: WebSocket, why: str) -> None:
    """Say in the terminal why no shell opens, then close (policy violation)."""
    await socket.accept()
    await socket.send_text(f"{why}; no shell was opened\r\n")
    await socket.close(code=1008)


async def serve_terminal(socket: WebSocket, argv: list[str], run_dir: Path, run_id: str) -> None:
    """Run `argv` on a pty and relay it to `socket` until either side ends."""
    await socket.accept()
    try:
        mark_touched(run_dir)
    except OSError as exc:
        await socket.send_text(
            f"cannot record in {run_dir} that run {run_id} was touched "
            f"({exc.strerror or exc}); no shell was opened\r\n"
        )
        await socket.close(code=1011)
        return
    master, slave = os.openpty()
    _resize(master, 80, 24)
    try:
        process = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=_take_terminal,
            close_fds=True,
        )
    except OSError as exc:
        os.close(master)
        os.close(slave)
        await socket.send_text(f"cannot run {argv[0]}: {exc.strerror or exc}\r\n")
        await socket.close(code=1011)
        return
    os.close(slave)
    loop = asyncio.get_running_loop()
    output: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        try:
            data = os.read(master, READ_SIZE)
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(master)
        output.put_nowait(data)

    loop.add_reader(master, readable)

    async def pump_out() -> None:
        while data := await output.get():
            await socket.send_bytes(data)

    async def pump_in() -> None:
        while True:
            message = await socket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("bytes"):
                os.write(master, message["bytes"])
            elif message.get("text"):
                _control(master, message["text"])

    sending = asyncio.ensure_future(pump_out())
    receiving = asyncio.ensure_future(pump_in())
    try:
        await asyncio.wait({sending, receiving}, return_when=asyncio.FIRST_COMPLETED)
    except WebSocketDisconnect:
        pass
    finally:
        for task in (sending, receiving):
            task.cancel()
        loop.remove_reader(master)
        # Waiting for the exec client to go takes up to seconds: not on the event loop.
        await asyncio.to_thread(_end, process)
        os.close(master)
        with contextlib.suppress(Exception):
            await socket.close()


def _control(master: int, text: str) -> None:
    try:
        request = json.loads(text)
        cols, rows = int(request["cols"]), int(request["rows"])
    except (ValueError, KeyError, TypeError):
        return
    _resize(master, cols, rows)


def _end(process: subprocess.Popen[bytes]) -> None:
    """Hang up the exec client's session, then kill it if it does not go."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGHUP)
    try:
        process.wait(timeout=3)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


ROOT_USER: Final = "root"
"""The one other user a shell may run as, and only when `ssebench web
--allow-root-terminal` says so."""


def user_of(asked: str | None, *, allow_root: bool = False) -> str | None:
    """The user the shell runs as: `model` unless the page asked for another; None for a
    user the page may not have (root without `allow_root`, any other name)."""
    if asked is None or asked == "":
        return DEFAULT_USER
    if asked == DEFAULT_USER or (asked == ROOT_USER and allow_root):
        return asked
    return None
