"""Listening sockets: the daemon's listeners and the MCP server's port.

Both bind before they serve, so that early clients wait in the listen queue.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path

from ssebench.daemon._errors import ConfigError


def bind_unix(path: Path, mode: int) -> socket.socket:
    """A listening Unix socket at `path`, created with `mode` (never wider, even briefly).

    Raises:
        ConfigError: something that is not a socket is in the way.
    """
    with contextlib.suppress(FileNotFoundError):
        existing = os.lstat(path).st_mode
        if stat.S_ISDIR(existing):
            raise ConfigError(f"{path} is a directory, not a socket")
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o777 & ~mode)
    try:
        sock.bind(str(path))
    finally:
        os.umask(previous)
    path.chmod(mode)
    sock.listen(128)
    sock.setblocking(False)
    return sock


def bind_tcp(host: str, port: int) -> socket.socket:
    """A listening TCP socket.

    Raises:
        OSError: the port is taken or the address is unusable.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock
