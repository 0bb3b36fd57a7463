"""`python -m ssebench.daemon.entrypoint AGENT-COMMAND...`: PID 1 of every tool image."""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping, Sequence
from pathlib import Path

from ssebench.daemon._environ import from_runtime, results_dir
from ssebench.daemon._errors import ConfigError
from ssebench.daemon.entrypoint._run import Entrypoint
from ssebench.daemon.entrypoint._settings import Settings, load_settings
from ssebench.spec import contract


def isolate() -> None:
    """Import nothing from the working directory, and leave it.

    The image's working directory is usually the agent's source tree, and
    this process runs as root and imports modules late (after the agent
    ran): a `json.py` the agent left there must never be one of them. The
    image starts the entrypoint with `python -I`, which already keeps the
    directory off the import path; this also covers any other way to start it.
    """
    cwd = str(Path.cwd())
    sys.path[:] = [entry for entry in sys.path if entry not in ("", ".", cwd)]
    os.chdir("/")


def confine_path(environ: MutableMapping[str, str], python: str = sys.executable) -> None:
    """Root's PATH becomes the sealed runtime's (`contract.ROOT_PATH`) when this runs from
    it, as in every checker; the image's PATH moves to `contract.ENV_IMAGE_PATH`, where
    the children of other users and root's plugins find it (`_users.image_path`).

    Root runs every program by its absolute path; a name it forgot must not find a
    program of the image, or one the agent wrote in a folder of the image's PATH.
    """
    if not from_runtime(python):
        return
    if contract.ENV_IMAGE_PATH not in environ:
        environ[contract.ENV_IMAGE_PATH] = environ.get("PATH", "")
    environ["PATH"] = contract.ROOT_PATH


def main(argv: Sequence[str] | None = None) -> int:
    """Run the container: services, the agent command, grading.

    Args:
        argv: the agent command (default: the command line after the module).

    Returns:
        The container's exit status: the agent's; 124 when its time limit
        killed it; 128+N after stop signal N (143: SIGTERM); 2 when the run
        could not start.
    """
    isolate()
    confine_path(os.environ)
    command = list(sys.argv[1:] if argv is None else argv)
    try:
        settings = load_settings(command, os.environ)
    except ConfigError as exc:
        fallback = Settings(
            agent_command=command,
            results_dir=results_dir(os.environ),
            environ=dict(os.environ),
        )
        return Entrypoint(fallback).refuse(str(exc))
    return Entrypoint(settings).run()
