"""In-container executables: daemon, entrypoint, evaluator and MCP server."""
