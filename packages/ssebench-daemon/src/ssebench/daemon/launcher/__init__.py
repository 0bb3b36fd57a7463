"""The agent container's PID 1, as `model`: `python -I -m ssebench.daemon.launcher` (it runs
the agent command the seal recorded in the image; arguments, when given, instead).

See `_main` for what it does and what it does not promise.
"""

from ssebench.daemon.launcher._main import main

__all__ = ["main"]
