"""The MCP server: one tool, `test_patch`, over streamable HTTP on port 3000 at `/mcp`.

`python -m ssebench.daemon.mcp` refuses to start on an invalid
`SSE_DIFFICULTY`, binds its port, then loads the MCP SDK and serves.
`test_patch` runs what the difficulty allows over the agent-facing socket
and answers in plain text. The SDK is imported only by `_server`.
"""

from ssebench.daemon.mcp._checks import TAIL_CHARS, AgentApi, LogStore, PatchTester
from ssebench.daemon.mcp._main import main

__all__ = ["TAIL_CHARS", "AgentApi", "LogStore", "PatchTester", "main"]
