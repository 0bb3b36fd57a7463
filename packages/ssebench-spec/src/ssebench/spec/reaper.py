"""Reaping the runs of dead runners: remove what they left, record what they did not.

A runner that dies (SIGKILL, a closed laptop, a cancelled CI job) leaves its
run's containers going and its run directory without a summary. Every run
carries its runner's lease (`ssebench.spec.lease`); `reap` finds the runs whose
runner is dead with one query, removes them through the backend, and records
each run directory that has no `summary.json` as `infra_error` with the reason,
through the runner's own recording code (`ssebench.spec.recording`).

It never touches a run whose runner lives, one started on another machine
(unless its lease is a renewed one that expired: Kubernetes; its run directory
is on that machine, so it is removed, not recorded), or one without a lease,
and it leaves kept runs (`--keep-container`) alone unless
asked. `ssebench runs reap` and `ssebench run` (for its own orphans, at start)
both call it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from ssebench.spec import contract, labels
from ssebench.spec._backend import Backend
from ssebench.spec._base import Message
from ssebench.spec._errors import SSEBenchError
from ssebench.spec._home import find_home
from ssebench.spec._models import GatewayReport, ModelGateway, load_models, models_path
from ssebench.spec._run import RunInfo
from ssebench.spec.lease import liveness, machine_id
from ssebench.spec.recording import RunEnding, read_run_file, record

log = logging.getLogger(__name__)

REMOVALS_AT_ONCE: Final = 8
"""Runs the reaper removes side by side."""

UNRECORDED_SUFFIX: Final = ".unrecorded"
"""A grade the container wrote but no runner recorded is kept under result.json plus this."""

Settle = Callable[[RunInfo], GatewayReport | None]
"""Revokes a reaped run's model key and returns what it used (None: no key, or unknown).

The seam for the model gateway: `no_gateway` revokes nothing."""

ReapAction = Literal["removed", "would remove", "failed"]


class ReapedRun(Message, kw_only=True, frozen=True):
    """One run the reaper found with a dead runner, and what it did."""

    run_id: str
    name: str
    state: str
    runner_pid: str
    run_dir: str | None
    action: ReapAction
    recorded: bool
    """Whether the reaper wrote the run's summary (it had none)."""
    detail: str | None = None


def no_gateway(run: RunInfo) -> GatewayReport | None:
    """The Settle of a setup without a model gateway: nothing to revoke, no spend known."""
    return None


def gateway_settle(backend: Backend[Any]) -> Settle:
    """Revoke a reaped run's model key through the backend's gateway and return its use.

    The gateway is opened only for a run that used a model, and once. One that
    cannot be opened or asked is logged: the run is then recorded without its spend
    (it is already removed, and a record without spend beats none).
    """
    gateways: list[ModelGateway] = []

    def settle(run: RunInfo) -> GatewayReport | None:
        if run.labels.get(labels.MODEL, "none") == "none":
            return None
        try:
            if not gateways:
                gateways.append(backend.gateway(load_models(models_path(find_home()))))
            return gateways[0].close_key(run.run_id)
        except SSEBenchError as exc:  # models.yaml unreadable (UserError) included
            log.warning("cannot revoke the model key of run %s: %s", run.run_id, exc)
            return None

    return settle


@dataclass(frozen=True, kw_only=True)
class ReapOptions:
    """What `reap` may touch."""

    dry_run: bool = False
    include_kept: bool = False
    under: Path | None = None
    """Only runs whose run directory is below this folder (None: every run)."""


def orphans(backend: Backend[Any], options: ReapOptions) -> list[RunInfo]:
    """The runs of dead runners on this machine that `options` allow to reap (one query).

    Raises:
        BackendError: the platform cannot be asked.
    """
    # Every run `ssebench runs list` shows, not only this machine's: a renewed lease
    # (Kubernetes) whose runner elsewhere stopped renewing it is dead too (`liveness`).
    found = backend.list_runs({labels.WEBUI: "true"})
    under = str(options.under.absolute()) + os.sep if options.under is not None else None
    chosen = []
    for run in found:
        if liveness(run.labels) != "dead":
            continue
        if run.handle.keep and not options.include_kept:
            continue
        results = run.labels.get(labels.RESULTS)
        if under is not None and not (results and (results + os.sep).startswith(under)):
            continue
        chosen.append(run)
    return chosen


def reap(
    backend: Backend[Any], options: ReapOptions, settle: Settle = no_gateway
) -> list[ReapedRun]:
    """Remove the runs of dead runners and record the ones their runner did not.

    Args:
        backend: the platform.
        options: dry run, kept runs, which results folder.
        settle: revokes each reaped run's model key and returns what it used.

    Returns:
        One entry per run found, in the order found.

    Raises:
        BackendError: the platform cannot be asked for its runs.
    """
    found = orphans(backend, options)
    if options.dry_run:
        return [_entry(run, run.labels.get(labels.RESULTS), "would remove", recorded=False)
                for run in found]  # fmt: skip

    def remove(run: RunInfo) -> str | None:
        try:
            backend.remove(run.handle)
        except SSEBenchError as exc:
            return str(exc)
        return None

    # The platform's work (containers, pods), several at once: one by one, reaping the
    # runs of an evaluation's dead runner took many times as long as listing them.
    with ThreadPoolExecutor(max_workers=REMOVALS_AT_ONCE) as pool:
        failures = list(pool.map(remove, found))
    done = []
    for run, failure in zip(found, failures, strict=True):
        run_dir = run.labels.get(labels.RESULTS)
        pid = run.labels.get(labels.LEASE_PID, "?")
        action: ReapAction = "failed" if failure is not None else "removed"
        detail = failure
        used = settle(run)
        recorded = False
        # The run directory of another machine's runner is on that machine.
        if run_dir is not None and run.labels.get(labels.LEASE_MACHINE) == machine_id():
            try:
                recorded = _record_orphan(Path(run_dir), run, pid, used)
            except OSError as exc:
                detail = f"cannot record the run in {run_dir}: {exc.strerror or exc}"
                action = "failed"
        done.append(_entry(run, run_dir, action, recorded=recorded, detail=detail))
    return done


def _entry(
    run: RunInfo,
    run_dir: str | None,
    action: ReapAction,
    *,
    recorded: bool,
    detail: str | None = None,
) -> ReapedRun:
    return ReapedRun(
        run_id=run.run_id,
        name=run.name,
        state=run.state,
        runner_pid=run.labels.get(labels.LEASE_PID, "?"),
        run_dir=run_dir,
        action=action,
        recorded=recorded,
        detail=detail,
    )


def _record_orphan(run_dir: Path, run: RunInfo, pid: str, used: GatewayReport | None) -> bool:
    """Record a reaped run whose directory has no summary; False when it has one or cannot.

    Raises:
        OSError: the run directory cannot be written.
    """
    if not run_dir.is_dir() or (run_dir / contract.SUMMARY_FILE).exists():
        return False
    written = read_run_file(run_dir)
    if written is None or written.config is None:
        log.warning("cannot record run %s: its run.json is missing or too old", run.run_id)
        return False
    result = run_dir / contract.RESULT_FILE
    kept = ""
    if result.is_file() and result.stat().st_size > 0:
        # The container went on after its runner died and graded the run; nobody
        # watched it, so the run counts as the harness's failure (and is retried).
        result.replace(result.with_name(result.name + UNRECORDED_SUFFIX))
        kept = f"; the grade it left is kept as {contract.RESULT_FILE}{UNRECORDED_SUFFIX}"
    exit_status = f", exit status {run.exit_code}" if run.exit_code is not None else ""
    ending = RunEnding(
        started=True,
        failure=(
            f"its runner (pid {pid}) ended before recording the run; the reaper removed "
            f"it (container {run.state}{exit_status}){kept}"
        ),
    )
    record(
        run_dir,
        ending,
        task=run.labels.get(labels.TASK_ID, written.task_name),
        config=written.config,
        run_id=run.run_id,
        started_at=run.created_at or _mtime(run_dir / contract.RUN_FILE),
        gateway=used,
    )
    return True


def _mtime(path: Path) -> str:
    try:
        moment = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        moment = datetime.now(UTC)
    return moment.isoformat(timespec="seconds")
