"""Recording a run in its directory: result.json, summary.json, run.json, reference.patch.

Every run is recorded, also one that failed to start, was stopped, or left
no grade: it then gets status `error` and a reason. Every summary says how
the run ended in one word, its `outcome` (`outcome_of`).
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from ssebench.runner._plan import RunPlan
from ssebench.runner._run_dir import REFERENCE_FILE, RESULT_FILE, RUN_FILE, SUMMARY_FILE
from ssebench.runner._signals import signal_name
from ssebench.spec import (
    DecodeError,
    Outcome,
    PatchResult,
    Result,
    RunSpec,
    RuntimeResult,
    Summary,
    decode_json,
    encode_json,
)

log = logging.getLogger(__name__)

UNREADABLE_SUFFIX: Final = ".unreadable"
"""An unreadable result.json is kept under its name plus this, for whoever debugs the run."""


@dataclass(frozen=True, kw_only=True)
class RunEnding:
    """How the run's container ended, as the Runner saw it."""

    started: bool
    """Whether `start` returned a handle."""

    exit_status: int | None = None
    """What `wait` returned, if it returned."""

    failure: str | None = None
    """A step that failed (start, wait, collect_results), as one line without secrets."""

    stopped_by: int | None = None
    """The signal that made the runner stop the run, if one did."""


def write_json(path: Path, value: object) -> None:
    """Write `value` as indented JSON, replacing `path` atomically.

    Raises:
        OSError: the file cannot be written.
    """
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(encode_json(value, pretty=True))
    temporary.replace(path)


def write_run_record(run_dir: Path, spec: RunSpec) -> None:
    """Write `run.json`: the spec with the environment's names and none of its values.

    Raises:
        OSError: the file cannot be written.
    """
    write_json(run_dir / RUN_FILE, spec.record())


def read_result(run_dir: Path) -> tuple[dict[str, Any], Result] | str:
    """Read the grade the container left in `result.json`.

    Args:
        run_dir: the run directory, after `collect_results`.

    Returns:
        The file's fields (all of them, also those this runner does not know)
        and the decoded grade; or, when there is no usable grade, why not, as
        a phrase like "the run left an empty result.json".
    """
    path = run_dir / RESULT_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return f"the run left no {RESULT_FILE}"
    except OSError as exc:
        return f"the run left an unreadable {RESULT_FILE} ({exc.strerror})"
    if not data.strip():
        return f"the run left an empty {RESULT_FILE}"
    try:
        result = decode_json(data, Result, what=RESULT_FILE)
        fields = decode_json(data, dict[str, Any], what=RESULT_FILE)
    except DecodeError as exc:
        _keep_aside(path)
        return f"the run left an unreadable {RESULT_FILE} ({exc})"
    return fields, result


def _keep_aside(path: Path) -> None:
    try:
        path.replace(path.with_name(path.name + UNREADABLE_SUFFIX))
    except OSError as exc:
        log.warning("cannot keep the unreadable %s aside: %s", path.name, exc.strerror)


def no_grade_reason(ending: RunEnding, why: str) -> str:
    """One line that says why a run has no grade.

    Args:
        ending: how the container ended.
        why: what `read_result` said about result.json.

    Returns:
        The reason, e.g. "stopped by SIGTERM; the run left an empty result.json
        (container exit status 143)".
    """
    if not ending.started:
        return ending.failure or "the run did not start"
    parts = []
    if ending.stopped_by is not None:
        parts.append(f"stopped by {signal_name(ending.stopped_by)}")
    if ending.failure:
        parts.append(ending.failure)
    if ending.exit_status is not None:
        why += f" (container exit status {ending.exit_status})"
    parts.append(why)
    return "; ".join(parts)


def outcome_of(ending: RunEnding, result: Result) -> Outcome:
    """How the run ended (DESIGN.md §5): exactly one outcome, decided in this order.

    - `stopped`: the runner stopped the run on a signal, or the run's container
      says a stop signal ended it before its grade (`runs stop`, the engine)
      while the runner itself saw nothing fail (a run the runner stops because
      it cannot watch it is an `infra_error`);
    - `infra_error`: the grade is `error` for a reason of the harness or the
      engine (no grade at all, a failed start, a crash, the evaluator's
      timeout, a lost daemon; a grade without a source is read as this);
    - `grader_error`: the grade is `error` because the task is broken
      (`error_source` `task`: a check's script cannot be executed, no check);
    - `budget_exceeded`: the agent's model budget ran out; its patch is graded
      and the grade kept beside the outcome;
    - `agent_timeout`: the agent reached its time limit; its patch is graded
      and the grade kept beside the outcome;
    - else the grade: `passed` or `failed`.

    Args:
        ending: how the run's container ended, as the runner saw it.
        result: the grade as recorded (the runner's `error` grade when the run left none).

    Returns:
        The outcome.
    """
    patch, runtime = result.patch_result, result.runtime_result
    if ending.stopped_by is not None or (runtime.stopped_by is not None and not ending.failure):
        return "stopped"
    if patch.status == "error":
        return "grader_error" if patch.error_source == "task" else "infra_error"
    # `budget_exceeded` comes before `agent_timeout` once something can report it: the
    # model gateway (a later issue) will record an exhausted budget in the run's
    # results. Until then nothing reports one, and no run gets this outcome.
    if runtime.agent_timeout:
        return "agent_timeout"
    return patch.status


def record_run(
    plan: RunPlan, ending: RunEnding, *, started_at: str, reference_patch: Path | None
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

    Returns:
        The summary as written.

    Raises:
        OSError: result.json or summary.json cannot be written.
    """
    run_dir = plan.run_dir
    read = read_result(run_dir)
    if isinstance(read, str):
        reason = no_grade_reason(ending, read)
        log.warning("the run has no grade: %s", reason)
        result = Result(
            patch_result=PatchResult(status="error", error_msg=reason, error_source="harness"),
            runtime_result=RuntimeResult(),
            config=plan.config,
        )
        write_json(run_dir / RESULT_FILE, result)
    else:
        fields, result = read
        # Written from the file's own fields so that what this runner does not
        # know about survives; only `config` is the runner's.
        fields["config"] = msgspec.to_builtins(plan.config)
        write_json(run_dir / RESULT_FILE, fields)
    summary = Summary(
        task=plan.task.id,
        config=plan.config,
        patch_result=result.patch_result,
        runtime_result=result.runtime_result,
        run_id=plan.run_id,
        started_at=started_at,
        spend=None,
        outcome=outcome_of(ending, result),
    )
    write_json(run_dir / SUMMARY_FILE, summary)
    if reference_patch is not None:
        try:
            shutil.copyfile(reference_patch, run_dir / REFERENCE_FILE)
        except OSError as exc:
            log.warning("cannot copy the reference patch into the run directory: %s", exc.strerror)
    return summary
