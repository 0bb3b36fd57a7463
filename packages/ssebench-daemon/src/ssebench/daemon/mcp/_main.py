"""`python -m ssebench.daemon.mcp`: the MCP server (root; the agent calls it on port 3000)."""

from __future__ import annotations

import argparse
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ssebench.daemon._environ import agent_socket as parse_agent_socket
from ssebench.daemon._environ import parse_check_timeout, parse_difficulty
from ssebench.daemon._errors import ConfigError
from ssebench.daemon.server._listening import bind_tcp
from ssebench.spec import contract

DEFAULT_HOST = "127.0.0.1"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the MCP server until SIGTERM.

    Returns:
        0 after SIGTERM; 2 when it refuses to start (a bad `SSE_DIFFICULTY`, the port taken).
    """
    parser = argparse.ArgumentParser(prog="python -m ssebench.daemon.mcp")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=contract.MCP_PORT)
    parser.add_argument("--path", default=contract.MCP_PATH)
    parser.add_argument("--log-dir", type=Path, default=None, help="where full logs go (/tmp)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        difficulty = parse_difficulty(os.environ.get(contract.ENV_DIFFICULTY))
        check_timeout = parse_check_timeout(os.environ.get(contract.ENV_CHECK_TIMEOUT))
        agent_socket = parse_agent_socket(os.environ)
    except ConfigError as exc:
        print(f"ssebench-mcp: refusing to start: {exc}", file=sys.stderr, flush=True)
        return 2
    try:
        sock = bind_tcp(args.host, args.port)
    except OSError as exc:
        print(
            f"ssebench-mcp: refusing to start: cannot listen on {args.host}:{args.port}: {exc}",
            file=sys.stderr,
            flush=True,
        )
        return 2
    print(
        f"ssebench-mcp: listening on http://{args.host}:{args.port}{args.path}; "
        f"difficulty {difficulty}; daemon {agent_socket}",
        file=sys.stderr,
        flush=True,
    )
    # The SDK (a second of CPU, most of the memory) loads when the first client
    # connects, who waits in the listen queue meanwhile: a run whose agent never
    # uses MCP never pays for it, and its checks do not compete with the loading.
    waited = _wait_for_first_client(sock)
    loading = time.monotonic()
    import anyio

    from ssebench.daemon._client._api import DaemonApi
    from ssebench.daemon.mcp._checks import LogStore, PatchTester
    from ssebench.daemon.mcp._server import build_server, serve

    tester = PatchTester(
        DaemonApi(agent_socket),
        difficulty=difficulty,
        logs=LogStore(args.log_dir),
        check_timeout=check_timeout,
    )
    server = build_server(tester.run)
    print(
        f"ssebench-mcp: first client after {waited:.3f} s; SDK loaded in "
        f"{time.monotonic() - loading:.3f} s",
        file=sys.stderr,
        flush=True,
    )
    anyio.run(lambda: serve(server, sock, host=args.host, path=args.path))
    return 0


def _wait_for_first_client(sock: socket.socket) -> float:
    """Block until a connection waits on `sock` (it is not accepted here).

    SIGTERM ends the server with status 0 from now until the web server puts in
    its own handler.

    Returns:
        The seconds waited.
    """
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    started = time.monotonic()
    select.select([sock], [], [])
    return time.monotonic() - started
