"""Recording a run in its directory: result.json, summary.json, run.json, reference.patch.

The recording itself lives in `ssebench.spec.recording`, shared with `ssebench
runs reap` (which records the runs of dead runners); this module adds what only
the runner knows: the run's provenance and the reference patch.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from ssebench.runner._plan import RunPlan
from ssebench.runner._provenance import provenance_of
from ssebench.runner._run_dir import REFERENCE_FILE
from ssebench.spec import GatewayReport, Images, Summary
from ssebench.spec.recording import (
    UNREADABLE_SUFFIX,
    RunEnding,
    no_grade_reason,
    outcome_of,
    read_result,
    record,
    write_json,
    write_run_record,
)

log = logging.getLogger(__name__)

__all__ = [
    "UNREADABLE_SUFFIX",
    "RunEnding",
    "no_grade_reason",
    "outcome_of",
    "read_result",
    "record_run",
    "write_json",
    "write_run_record",
]


def record_run(
    plan: RunPlan,
    ending: RunEnding,
    *,
    started_at: str,
    reference_patch: Path | None,
    images: Images | None = None,
    gateway: GatewayReport | None = None,
) -> Summary:
    """Record a finished run in its directory.

    Adds `config` to `result.json` (writing an `error` grade with the reason
    when the run left none), writes `summary.json` with the run's outcome
    (`outcome_of`), and copies the task's reference patch in as `reference.patch`.

    Args:
        plan: the run.
        ending: how its container ended.
        started_at: when it started, ISO 8601 UTC.
        reference_patch: the private copy of the reference fix, if there is one.
        images: the images the run was started from, for its provenance.
        gateway: what the run's model key used (its spend and calls), if it had one.

    Returns:
        The summary as written.

    Raises:
        OSError: result.json or summary.json cannot be written.
    """
    run_dir = plan.run_dir
    try:
        provenance = provenance_of(plan, images)
    except OSError as exc:
        # The run happened; a file that vanished since must not lose its record.
        log.warning("cannot record what the run was made of: %s", exc.strerror or exc)
        provenance = None
    summary = record(
        run_dir,
        ending,
        task=plan.task.id,
        config=plan.config,
        run_id=plan.run_id,
        started_at=started_at,
        provenance=provenance,
        gateway=gateway,
    )
    if reference_patch is not None:
        try:
            shutil.copyfile(reference_patch, run_dir / REFERENCE_FILE)
        except OSError as exc:
            log.warning("cannot copy the reference patch into the run directory: %s", exc.strerror)
    return summary
