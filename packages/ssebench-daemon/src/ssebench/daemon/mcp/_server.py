"""The MCP SDK's side: one tool, `test_patch`, over streamable HTTP (imported after binding).

Importing the SDK takes seconds and most of this process's memory, so
`_main` binds the port first and imports this module afterwards: a client
that connects early waits in the listen queue instead of being refused.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Final

import anyio
import anyio.to_thread
import uvicorn
from mcp.server.mcpserver import MCPServer

TOOL_DESCRIPTION: Final = (
    "Check your patch: builds the project with your changes, runs the proofs of concept "
    "(does the bug still trigger?), the intent tests and the project's tests, as far as this "
    "run's difficulty allows, and tells you what passed and what failed, with the failing "
    "output. Takes no arguments; it checks the current state of the source tree."
)

INSTRUCTIONS: Final = (
    "SSEBench: call test_patch (no arguments) to build and test your fix of the task's "
    "security bug. Its answer starts with PASSED, FAILED or NOTHING CHECKED."
)


def build_server(run_checks: Callable[[], str]) -> MCPServer:
    """The MCP server with its one tool.

    Args:
        run_checks: runs test_patch (blocking; it is called in a worker thread,
            one call at a time).

    Returns:
        The server.
    """
    server: MCPServer = MCPServer(name="ssebench", instructions=INSTRUCTIONS, log_level="INFO")
    lock = anyio.Lock()

    async def test_patch() -> str:
        async with lock:
            return await anyio.to_thread.run_sync(run_checks)

    server.add_tool(
        test_patch, name="test_patch", description=TOOL_DESCRIPTION, structured_output=False
    )
    return server


async def serve(server: MCPServer, sock: socket.socket, *, host: str, path: str) -> None:
    """Serve streamable HTTP at `path` on an already listening socket until SIGTERM/SIGINT.

    Args:
        server: the MCP server.
        sock: the bound, listening socket.
        host: the address it is bound to (localhost turns on DNS-rebinding protection).
        path: the endpoint's path, e.g. `/mcp`.
    """
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level="info",
        access_log=False,
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=2,
    )
    await uvicorn.Server(config).serve(sockets=[sock])
