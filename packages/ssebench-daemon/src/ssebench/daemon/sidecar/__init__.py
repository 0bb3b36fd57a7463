"""PID 1 of the task container in sidecar mode (`python -m ssebench.daemon.sidecar`).

The task container (`tool-sidecar/<task>`) runs the daemon and nothing else: the
agent, the MCP server and the evaluator run in the agent container, which reaches
the daemon through the sockets on the shared `/run/ssebench` volume (docs/architecture.md).
"""

from ssebench.daemon.sidecar._main import main

__all__ = ["main"]
