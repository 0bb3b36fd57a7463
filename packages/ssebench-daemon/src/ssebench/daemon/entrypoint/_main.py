"""`python -m ssebench.daemon.entrypoint AGENT-COMMAND...`: PID 1 of every tool image."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ssebench.daemon.entrypoint._contract import contract
from ssebench.daemon.entrypoint._run import Entrypoint
from ssebench.daemon.entrypoint._settings import Settings, SettingsError, load_settings


def main(argv: Sequence[str] | None = None) -> int:
    """Run the container: services, the agent command, grading.

    Args:
        argv: the agent command (default: the command line after the module).

    Returns:
        The container's exit status: the agent's; 124 when its time limit
        killed it; 128+N after stop signal N (143: SIGTERM); 2 when the run
        could not start.
    """
    command = list(sys.argv[1:] if argv is None else argv)
    try:
        settings = load_settings(command, os.environ)
    except SettingsError as exc:
        fallback = Settings(
            agent_command=command,
            results_dir=Path(os.environ.get(contract.ENV_RESULTS) or contract.RESULTS_DIR),
            environ=dict(os.environ),
        )
        return Entrypoint(fallback).refuse(str(exc))
    return Entrypoint(settings).run()
