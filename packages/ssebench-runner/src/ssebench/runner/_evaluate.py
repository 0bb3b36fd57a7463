"""The Evaluator: carries out an evaluation's pending cells, N at a time, through one Runner.

Each run goes through `Runner.run`, exactly as `ssebench run` carries it out
and records it; the Evaluator only chooses what runs when, retries an
`infra_error` (up to `retries` more times), and keeps `eval.json` up to date:
a run's ID is written there before the run is created, so a folder never
holds a run its evaluation does not know.

Stopping: `stop` (from a signal handler, in the main thread) stops the runs
in flight through `Runner.stop_all`; they are recorded as `stopped`, and no
new run starts. `run` blocks in the calling thread, with the runs in daemon
threads, so a second signal can end the process at once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import msgspec

from ssebench.runner._eval_plan import EVAL_FILE, RETRIED_OUTCOMES, EvalPlan, Pending, Skipped
from ssebench.runner._lifecycle import RunCancelled, Runner, iso_utc, said, utc_now
from ssebench.runner._options import NO_MODEL, new_run_id
from ssebench.runner._plan import plan_of
from ssebench.runner._record import write_json
from ssebench.spec import Backend, EvalRecord, EvalSlot, SSEBenchError, Summary

log = logging.getLogger(__name__)

POLL: Final = 0.1
"""Seconds between looks at the workers while waiting (signal handlers run in between)."""


@dataclass(frozen=True, kw_only=True)
class Finished:
    """A cell that ran in this evaluation: its last run's summary, or why there is none."""

    index: int
    slot: EvalSlot
    summary: Summary | None
    error: str | None = None
    """Why the run was not recorded (its images could not be prepared, ...)."""
    attempts: int = 1


@dataclass(kw_only=True)
class Progress:
    """Where an evaluation stands; a copy is handed to the progress callback."""

    total: int
    skipped: int
    done: int = 0
    running: int = 0
    passed: int = 0
    """Runs that passed, the skipped ones included."""
    retried: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def left(self) -> int:
        """Cells not yet started."""
        return self.total - self.skipped - self.done - self.running


@dataclass(frozen=True, kw_only=True)
class EvalResult:
    """What an evaluation did this time."""

    finished: list[Finished]
    skipped: list[Skipped]
    stopped_by: int | None
    """The signal that stopped it, if one did."""


ProgressCallback = Callable[[Progress, Finished | None], None]
"""Told the progress after each change, and the cell that just finished, if one did."""


class Evaluator:
    """Runs an evaluation's pending cells on one backend, `concurrency` at a time."""

    def __init__(
        self,
        backend: Backend[Any],
        *,
        concurrency: int = 1,
        retries: int = 1,
        on_progress: ProgressCallback | None = None,
        clock: Callable[[], datetime] = utc_now,
        runner: Runner | None = None,
    ) -> None:
        """Evaluate on `backend`.

        Args:
            backend: the platform to run on.
            concurrency: how many runs may be in flight at once (at least 1).
            retries: how many more times a cell whose run ended in `infra_error` runs.
            on_progress: told after every change, from whichever thread made it.
            clock: the current time (tests fix it).
            runner: the Runner to carry out runs with (default: one on `backend`).
        """
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self._runner = runner or Runner(backend, clock=clock)
        self._concurrency = concurrency
        self._retries = retries
        self._on_progress = on_progress
        self._clock = clock
        self._lock = threading.Lock()
        self._record: EvalRecord | None = None
        self._progress = Progress(total=0, skipped=0)

    def stop(self, signum: int) -> None:
        """Stop the runs in flight (they are recorded) and start no more; safe in a signal handler.

        Args:
            signum: the signal that asked for it, recorded in each stopped run.
        """
        self._runner.stop_all(signum)

    def run(self, plan: EvalPlan, pending: list[Pending], skipped: list[Skipped]) -> EvalResult:
        """Run every pending cell and wait for them.

        Writes `eval.json` (creating the evaluation's folder) before the first
        run, and again as each run is created.

        Args:
            plan: the evaluation.
            pending: the cells to run (`what_to_run`).
            skipped: the cells that stand, for the progress and the result.

        Returns:
            What ran and what was skipped.

        Raises:
            OSError: the evaluation's folder or `eval.json` cannot be written.
        """
        self._record = plan.record
        self._progress = Progress(
            total=len(plan.record.slots),
            skipped=len(skipped),
            passed=sum(1 for cell in skipped if cell.summary.outcome == "passed"),
        )
        plan.folder.mkdir(parents=True, exist_ok=True)
        self._save(plan)
        work: queue.SimpleQueue[Pending] = queue.SimpleQueue()
        for cell in pending:
            work.put(cell)
        finished: list[Finished] = []
        self._report(None)
        workers = [
            threading.Thread(
                target=self._work,
                args=(plan, work, finished),
                name=f"ssebench-eval-{number}",
                daemon=True,
            )
            for number in range(min(self._concurrency, len(pending)))
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            # Joined with a timeout so that signal handlers run in this thread meanwhile.
            while worker.is_alive():
                worker.join(POLL)
        finished.sort(key=lambda cell: cell.index)
        return EvalResult(finished=finished, skipped=skipped, stopped_by=self._runner.stopping)

    def _work(self, plan: EvalPlan, work: queue.SimpleQueue[Pending], out: list[Finished]) -> None:
        while self._runner.stopping is None:
            try:
                cell = work.get_nowait()
            except queue.Empty:
                return
            done = self._run_cell(plan, cell)
            if done is None:
                continue
            with self._lock:
                out.append(done)
                self._progress.done += 1
                if done.summary is not None and done.summary.outcome == "passed":
                    self._progress.passed += 1
            self._report(done)

    def _run_cell(self, plan: EvalPlan, cell: Pending) -> Finished | None:
        """Run a cell until its outcome counts or its retries are used; None if it never started."""
        attempts = 0
        while True:
            attempts += 1
            slot = self._slot(cell.index)
            task, agent = plan.tasks[slot.task], plan.agents[slot.agent]
            run_id = new_run_id(self._clock())
            summary: Summary | None = None
            error: str | None = None
            with self._lock:
                self._progress.running += 1
            try:
                run_plan = plan_of(
                    task,
                    agent,
                    plan.config(slot),
                    run_id=run_id,
                    results_root=plan.results_root,
                    prebuilt=plan.prebuilt,
                    models=plan.models if slot.model != NO_MODEL else None,
                    tool_layer=plan.tool_layer,
                    plugins_home=plan.plugins_home,
                )
                self._add_run(plan, cell.index, run_id)
                self._report(None)
                summary = self._runner.run(run_plan)
            except RunCancelled:
                self._drop_run(plan, cell.index, run_id)
                return None
            except (SSEBenchError, OSError) as exc:
                # Nothing was recorded: the images or the reference patch could not be had.
                error = said(exc)
                log.warning("%s: %s", _name(slot), error)
                if not plan.run_dir(slot, run_id).exists():
                    self._drop_run(plan, cell.index, run_id)
            except Exception as exc:
                error = f"unexpected error: {said(exc)}"
                log.exception("%s: %s", _name(slot), error)
            finally:
                with self._lock:
                    self._progress.running -= 1
            infra = summary is None or summary.outcome in RETRIED_OUTCOMES
            if infra and attempts <= self._retries and self._runner.stopping is None:
                with self._lock:
                    self._progress.retried += 1
                log.warning(
                    "%s: infra_error, running it again (retry %d of %d)",
                    _name(slot),
                    attempts,
                    self._retries,
                )
                continue
            return Finished(
                index=cell.index,
                slot=self._slot(cell.index),
                summary=summary,
                error=error,
                attempts=attempts,
            )

    def _slot(self, index: int) -> EvalSlot:
        with self._lock:
            assert self._record is not None
            return self._record.slots[index]

    def _add_run(self, plan: EvalPlan, index: int, run_id: str) -> None:
        self._update(plan, index, lambda ids: [*ids, run_id])

    def _drop_run(self, plan: EvalPlan, index: int, run_id: str) -> None:
        self._update(plan, index, lambda ids: [each for each in ids if each != run_id])

    def _update(self, plan: EvalPlan, index: int, change: Callable[[list[str]], list[str]]) -> None:
        with self._lock:
            assert self._record is not None
            slots = list(self._record.slots)
            slots[index] = msgspec.structs.replace(
                slots[index], run_ids=change(slots[index].run_ids)
            )
            self._record = msgspec.structs.replace(
                self._record, slots=slots, updated_at=iso_utc(self._clock())
            )
            write_json(plan.folder / EVAL_FILE, self._record)

    def _save(self, plan: EvalPlan) -> None:
        with self._lock:
            assert self._record is not None
            write_json(plan.folder / EVAL_FILE, self._record)

    def _report(self, done: Finished | None) -> None:
        if self._on_progress is None:
            return
        with self._lock:
            snapshot = Progress(**vars(self._progress))
        self._on_progress(snapshot, done)

    @property
    def record(self) -> EvalRecord | None:
        """The evaluation's record as last written."""
        return self._record


def _name(slot: EvalSlot) -> str:
    return f"{slot.task} {slot.agent} {slot.model} #{slot.repeat}"
