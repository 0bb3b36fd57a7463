"""The agent container's liveness, answered by the checker (on Kubernetes).

The kubelet ends one container of a pod only when its liveness probe fails. An `exec`
probe would run a program of the agent's image (as `model`: one that always succeeds
would keep the container alive past `stop`), so the agent container's probe is an HTTP
request to `contract.AGENT_ALIVE_PORT`, which the checker serves in the pod's network
namespace: 200 while the agent container may run, 503 once the backend wrote its kill
file (at `stop`, or at `TIMEOUT`).

The port is bound by root before the agent may start, so `model` can neither bind it
nor answer in the checker's place (Linux refuses a second listener on a port, and
SO_REUSEPORT joins only sockets of one user). One request at a time, each given
`REQUEST_TIMEOUT` seconds: an agent that holds connections open delays only its own
container's probes.
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Any, Final

REQUEST_TIMEOUT: Final = 2.0
ALL_ADDRESSES: Final = "0.0.0.0"  # noqa: S104 (the kubelet asks at the pod's address)


class _Handler(http.server.BaseHTTPRequestHandler):
    timeout = REQUEST_TIMEOUT
    kill_file: Path

    def do_GET(self) -> None:
        ended = self.kill_file.exists()
        body = b"ended\n" if ended else b"alive\n"
        self.send_response(503 if ended else 200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _quiet(*_args: Any) -> None:
    """The handler's request log: none (the kubelet asks every few seconds, and the
    standard library's writes each request to stderr)."""


class AliveServer:
    """Serves the agent container's liveness on `port` until the process ends."""

    def __init__(self, kill_file: Path, port: int, host: str = ALL_ADDRESSES) -> None:
        # Set here, not overridden in the class: the entrypoint loads no typing_extensions.
        handler = type("AliveHandler", (_Handler,), {"kill_file": kill_file, "log_message": _quiet})
        # Bound here, so a port already taken is the caller's error, before the agent runs.
        self._server = http.server.HTTPServer((host, port), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="agent-alive", daemon=True
        )

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Answer from now on (a thread of its own)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop answering and close the port."""
        self._server.shutdown()
        self._server.server_close()
