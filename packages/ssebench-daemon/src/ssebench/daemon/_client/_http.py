"""HTTP/1.1 over the daemon's Unix sockets, on bare sockets.

The entrypoint keeps this as its only client so that, during the agent
phase, it holds little more than the interpreter in memory (`http.client`
alone would add the `email` package, about 5 MB). One request per
connection (`Connection: close`); the answer is read to its end. The
evaluator and the MCP server add typed calls on top
(`ssebench.daemon._client._api`).
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from typing import Final

from ssebench.daemon._client._errors import (
    DaemonConnectionError,
    DaemonTimeoutError,
    DaemonUnreachableError,
)

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds a quick request (version, capabilities, agent_exited) may take."""

MAX_ANSWER_BYTES: Final = 256 * 1024 * 1024
"""The largest answer read (a check's output is capped at 1 MiB per stream by the daemon)."""


@dataclass(frozen=True)
class Reply:
    """A daemon's answer: the HTTP status and the body."""

    status: int
    body: bytes

    @property
    def ok(self) -> bool:
        """Whether the daemon did what was asked (HTTP 200)."""
        return self.status == 200

    def error_text(self) -> str:
        """The daemon's error message (`{"error": ...}`), or the start of the body."""
        try:
            data = json.loads(self.body)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("error"), str):
            return str(data["error"])
        text = self.body.decode("utf-8", errors="replace").strip()
        return text[:500] or f"HTTP {self.status} with an empty body"


def _parse(raw: bytes, path: str) -> Reply:
    """Split a whole HTTP/1.1 answer into status and body (Content-Length or chunked).

    Raises:
        DaemonConnectionError: the answer is not HTTP or ends early.
    """
    head, separator, rest = raw.partition(b"\r\n\r\n")
    if not separator:
        raise DaemonConnectionError(f"the daemon on {path} closed the connection mid-answer")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise DaemonConnectionError(f"not an HTTP answer from {path}: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _unchunk(rest, path)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if len(rest) < length:
            raise DaemonConnectionError(f"the daemon on {path} closed the connection mid-answer")
        body = rest[:length]
    else:
        body = rest
    return Reply(status=int(parts[1]), body=body)


def _unchunk(data: bytes, path: str) -> bytes:
    chunks: list[bytes] = []
    while True:
        size_line, separator, data = data.partition(b"\r\n")
        if not separator:
            raise DaemonConnectionError(f"the daemon on {path} closed the connection mid-answer")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return b"".join(chunks)
        chunks.append(data[:size])
        data = data[size + 2 :]


class UnixHTTPClient:
    """Requests to one daemon socket; a new connection per request (the daemon is local)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def request(
        self, method: str, target: str, body: bytes | None = None, *, timeout: float | None
    ) -> Reply:
        """Send one request and read the whole answer.

        Args:
            method: GET or POST.
            target: path and query, e.g. `/tool/bencher?action=build`.
            body: a JSON body, or None.
            timeout: the whole request's limit in seconds (None: no limit).

        Returns:
            The status and body, whatever the status.

        Raises:
            DaemonUnreachableError: the socket does not accept connections.
            DaemonTimeoutError: no complete answer within the limit.
            DaemonConnectionError: the daemon closed the connection mid-answer or
                did not answer HTTP.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.send(method, target, body, timeout=timeout) as sock:
            received = bytearray()
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise DaemonTimeoutError(f"no answer from {self.path} within {timeout:g} s")
                chunk = self._receive(sock, left, timeout)
                if not chunk:
                    break
                received += chunk
                if len(received) > MAX_ANSWER_BYTES:
                    raise DaemonConnectionError(f"the answer from {self.path} is too large")
        return _parse(bytes(received), self.path)

    def _receive(self, sock: socket.socket, left: float | None, timeout: float | None) -> bytes:
        try:
            if left is not None:
                sock.settimeout(left)
            return sock.recv(65536)
        except TimeoutError as exc:
            raise DaemonTimeoutError(f"no answer from {self.path} within {timeout:g} s") from exc
        except OSError as exc:
            raise DaemonConnectionError(f"the connection to {self.path} broke: {exc}") from exc

    def send(
        self, method: str, target: str, body: bytes | None = None, *, timeout: float | None
    ) -> socket.socket:
        """Connect and send one request; the answer is left to be read from the socket.

        The caller closes the socket. The daemon carries out a request whether or
        not its answer is read.

        Raises:
            DaemonUnreachableError: the socket does not accept connections.
            DaemonTimeoutError: the request could not be sent within `timeout`.
            DaemonConnectionError: the connection broke while sending.
        """
        payload = body or b""
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            f"Accept: application/json\r\nContent-Length: {len(payload)}\r\n"
            + ("Content-Type: application/json\r\n" if body is not None else "")
            + "\r\n"
        )
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            try:
                sock.connect(self.path)
            except (FileNotFoundError, ConnectionRefusedError, PermissionError) as exc:
                raise DaemonUnreachableError(
                    f"nothing answers on {self.path}: {exc.strerror or exc}"
                ) from exc
            sock.sendall(head.encode("latin-1") + payload)
        except TimeoutError as exc:
            sock.close()
            raise DaemonTimeoutError(f"cannot send to {self.path} within {timeout} s") from exc
        except DaemonUnreachableError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            raise DaemonConnectionError(f"the connection to {self.path} broke: {exc}") from exc
        except BaseException:
            sock.close()
            raise
        return sock

    def get(self, target: str, *, timeout: float | None = DEFAULT_TIMEOUT) -> Reply:
        """GET `target` (see `request`)."""
        return self.request("GET", target, timeout=timeout)

    def post(self, target: str, payload: bytes = b"{}", *, timeout: float | None = None) -> Reply:
        """POST a JSON body to `target` (see `request`); no time limit unless given."""
        return self.request("POST", target, payload, timeout=timeout)
