"""The entrypoint: PID 1 of every tool image (`python -m ssebench.daemon.entrypoint CMD...`).

It starts the daemon and the MCP server, runs the agent command as `model`
with its time limit, ends the agent phase, runs the evaluator, hands the
results to the owner of the host's run directory and writes the `.graded`
marker (docs/architecture.md). It imports only the standard library until the agent
has finished, to keep its memory small during the agent phase.
"""

from ssebench.daemon._errors import ConfigError
from ssebench.daemon.entrypoint._main import main
from ssebench.daemon.entrypoint._run import START_FAILED, Entrypoint
from ssebench.daemon.entrypoint._settings import Settings, load_settings

__all__ = ["START_FAILED", "ConfigError", "Entrypoint", "Settings", "load_settings", "main"]
