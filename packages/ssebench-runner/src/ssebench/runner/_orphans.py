"""`ssebench run` and `ssebench eval` reap their own orphans at start, with one query.

An earlier runner on this machine that died (SIGKILL, a closed laptop) left its
runs going; the next run in the same results folder removes them and records
the ones left without a summary (`ssebench.spec.reaper`), revoking the model
key of each that had one and recording its spend, as `ssebench runs reap` does. Kept runs, live
runners' runs and other results folders are never touched.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ssebench.spec import Backend, SSEBenchError
from ssebench.spec.reaper import ReapOptions, gateway_settle, reap

log = logging.getLogger(__name__)


def reap_own_orphans(backend: Backend[Any], results_root: Path) -> int:
    """Reap the dead runners' runs recorded under `results_root`; never raises for the platform.

    Returns:
        How many runs were reaped.
    """
    try:
        reaped = reap(backend, ReapOptions(under=results_root), settle=gateway_settle(backend))
    except (SSEBenchError, OSError) as exc:
        # A run must not fail over someone else's leftovers.
        log.warning("cannot look for runs left by dead runners: %s", exc)
        return 0
    for run in reaped:
        recorded = "; recorded as infra_error" if run.recorded else ""
        detail = f": {run.detail}" if run.detail else ""
        log.warning(
            "%s run %s, left by a runner that died (pid %s)%s%s",
            run.action,
            run.run_id,
            run.runner_pid,
            recorded,
            detail,
        )
    return len(reaped)
