"""Recording a run in its directory: result.json, summary.json and run.json.

One home for the recording code of `ssebench run` (ssebench-runner) and of
`ssebench runs reap` (ssebench-runs), so a run the reaper records for a dead
runner reads exactly like one its runner recorded. Every run is recorded, also
one that failed to start, was stopped, or left no grade: it then gets status
`error` and a reason. Every summary says how the run ended in one word, its
`outcome` (`outcome_of`).
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from ssebench.spec import contract
from ssebench.spec._codec import decode_json, encode_json
from ssebench.spec._errors import DecodeError
from ssebench.spec._models import GatewayReport
from ssebench.spec._plugins import MODEL_HOOKS, PluginResult
from ssebench.spec._results import (
    InfraReason,
    Outcome,
    PatchResult,
    Provenance,
    Result,
    RunConfig,
    RuntimeResult,
    Summary,
)
from ssebench.spec._run import RunRecord, RunSpec
from ssebench.spec.atomic import write_atomically
from ssebench.spec.touched import touched_at

log = logging.getLogger(__name__)

KILLED_STATUS: Final = 128 + signal.SIGKILL
"""A container's exit status when SIGKILL ended its first process."""

UNREADABLE_SUFFIX: Final = ".unreadable"
"""An unreadable result.json is kept under its name plus this, for whoever debugs the run."""


class RunFile(RunRecord, kw_only=True, frozen=True):
    """`run.json`: the RunSpec without environment values, and the run's settings.

    `config` lets `ssebench runs reap` record a run whose runner died before it
    could (None in files written before it existed).
    """

    config: RunConfig | None = None


@dataclass(frozen=True, kw_only=True)
class RunEnding:
    """How the run's container ended, as the Runner (or the reaper) saw it."""

    started: bool
    """Whether `start` returned a handle."""

    exit_status: int | None = None
    """What `wait` returned, if it returned."""

    failure: str | None = None
    """A step that failed (start, wait, collect_results), as one line without secrets."""

    stopped_by: int | None = None
    """The signal that made the runner stop the run, if one did."""


def signal_name(signum: int) -> str:
    """`SIGINT`, `SIGTERM`, ... for a signal number."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def write_json(path: Path, value: object) -> None:
    """Write `value` as indented JSON, replacing `path` atomically.

    Raises:
        OSError: the file cannot be written.
    """
    # 0o666 as for any file the user writes (the umask decides): records are the user's to share.
    write_atomically(path, encode_json(value, pretty=True), mode=0o666)


def write_run_record(run_dir: Path, spec: RunSpec, config: RunConfig | None = None) -> None:
    """Write `run.json`: the spec with the environment's names and none of its values.

    Raises:
        OSError: the file cannot be written.
    """
    record = spec.record()
    fields = {name: getattr(record, name) for name in record.__struct_fields__}
    write_json(run_dir / contract.RUN_FILE, RunFile(config=config, **fields))


def read_run_file(run_dir: Path) -> RunFile | None:
    """The run's `run.json`, or None when it is missing or unreadable."""
    try:
        return decode_json(
            (run_dir / contract.RUN_FILE).read_bytes(), RunFile, what=contract.RUN_FILE
        )
    except (OSError, DecodeError):
        return None


def read_result(run_dir: Path) -> tuple[dict[str, Any], Result] | str:
    """Read the grade the container left in `result.json`.

    Args:
        run_dir: the run directory, after `collect_results`.

    Returns:
        The file's fields (all of them, also those this runner does not know)
        and the decoded grade; or, when there is no usable grade, why not, as
        a phrase like "the run left an empty result.json".
    """
    path = run_dir / contract.RESULT_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return f"the run left no {contract.RESULT_FILE}"
    except OSError as exc:
        return f"the run left an unreadable {contract.RESULT_FILE} ({exc.strerror})"
    if not data.strip():
        return f"the run left an empty {contract.RESULT_FILE}"
    try:
        result = decode_json(data, Result, what=contract.RESULT_FILE)
        fields = decode_json(data, dict[str, Any], what=contract.RESULT_FILE)
    except DecodeError as exc:
        _keep_aside(path)
        return f"the run left an unreadable {contract.RESULT_FILE} ({exc})"
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
        if ending.exit_status == KILLED_STATUS and ending.stopped_by is None:
            why += (
                "; SIGKILL ended it from outside the run (docker kill, the engine, the OOM killer)"
            )
    parts.append(why)
    return "; ".join(parts)


def plugin_results(run_dir: Path, config: RunConfig) -> list[PluginResult]:
    """How each of the run's plugins ended, from the entrypoint's `plugins.json`.

    A plugin the file does not name (the container died, the run was reaped, the
    file is unreadable) is an `error` with the reason.

    Args:
        run_dir: the run directory, after `collect_results`.
        config: the run's settings (`config.plugins`).

    Returns:
        One result per plugin of `config.plugins`, in its order.
    """
    if not config.plugins:
        return []
    path = run_dir / contract.PLUGIN_RESULTS_FILE
    try:
        found = decode_json(path.read_bytes(), list[PluginResult], what=path.name)
    except (OSError, DecodeError) as exc:
        log.warning("cannot read the plugins' outcomes: %s", exc)
        found = []
    by_name = {result.name: result for result in found}
    return [
        by_name.get(plugin.name)
        or PluginResult(
            name=plugin.name,
            hook=plugin.hook,
            user=contract.MODEL_USER if plugin.hook in MODEL_HOOKS else "root",
            outcome="error",
            reason=f"the run ended without recording this plugin's outcome in {path.name}",
        )
        for plugin in config.plugins
    ]


def outcome_of(
    ending: RunEnding, result: Result, *, budget_exceeded: bool = False, provider_down: bool = False
) -> Outcome:
    """How the run ended (docs/results.md): exactly one outcome, decided in this order.

    - `stopped`: the runner stopped the run on a signal, or the run's container
      says a stop signal ended it before its grade (`runs stop`, the engine)
      while the runner itself saw nothing fail (a run the runner stops because
      it cannot watch it is an `infra_error`);
    - `infra_error`: the grade is `error` for a reason of the harness or the
      engine (no grade at all, a failed start, a crash, the evaluator's
      timeout, a lost daemon; a grade without a source is read as this);
    - `grader_error`: the grade is `error` because the task is broken
      (`error_source` `task`: a check's script cannot be executed, no check);
    - `infra_error` again, for the provider: the grade is not `passed` and the
      model's provider failed the run's last calls (`provider_down`);
    - `budget_exceeded`: the agent's model budget ran out; its patch is graded
      and the grade kept beside the outcome;
    - `agent_timeout`: the agent reached its time limit; its patch is graded
      and the grade kept beside the outcome;
    - else the grade: `passed` or `failed`.

    Args:
        ending: how the run's container ended, as the runner saw it.
        result: the grade as recorded (the runner's `error` grade when the run left none).
        budget_exceeded: the model gateway refused a call of the run for its budget.
        provider_down: the run's last model calls failed at the provider, after the
            gateway's retries, while the run kept under the gateway's cap of calls in
            flight (`Usage.provider_down` and no call refused for concurrency).

    Returns:
        The outcome.
    """
    patch, runtime = result.patch_result, result.runtime_result
    if ending.stopped_by is not None or (runtime.stopped_by is not None and not ending.failure):
        return "stopped"
    if patch.status == "error":
        return "grader_error" if patch.error_source == "task" else "infra_error"
    if provider_down and patch.status != "passed":
        return "infra_error"
    # The model gateway refused a call of this run because its budget was used up.
    if budget_exceeded:
        return "budget_exceeded"
    if runtime.agent_timeout:
        return "agent_timeout"
    return patch.status


def infra_reason(outcome: Outcome, result: Result, provider_down: bool) -> InfraReason | None:
    """Why an `infra_error` is one: the provider's when `outcome_of` made it so (a grade,
    not an `error` one, beside a provider that failed), else the harness's."""
    if outcome != "infra_error":
        return None
    return "provider" if provider_down and result.patch_result.status != "error" else "harness"


def record(
    run_dir: Path,
    ending: RunEnding,
    *,
    task: str,
    config: RunConfig,
    run_id: str,
    started_at: str,
    provenance: Provenance | None = None,
    gateway: GatewayReport | None = None,
) -> Summary:
    """Record a finished run in its directory.

    Adds `config` to `result.json` (writing an `error` grade with the reason
    when the run left none) and writes `summary.json` with the run's outcome
    (`outcome_of`). A run directory that vanished meanwhile is made again.

    Args:
        run_dir: the run directory.
        ending: how its container ended.
        task: the task's ID.
        config: the run's settings.
        run_id: the run's ID.
        started_at: when it started, ISO 8601 UTC.
        provenance: what the run was made of, if known.
        gateway: what the run's model key used (its spend and calls), if it had one.

    Returns:
        The summary as written.

    Raises:
        OSError: result.json or summary.json cannot be written.
    """
    vanished = not run_dir.is_dir()
    if vanished:
        # Removed from outside while the run went on (its bind-mounted results with it):
        # the run is still recorded, in a fresh directory, as the harness's failure.
        run_dir.mkdir(parents=True, exist_ok=True)
    read = read_result(run_dir)
    if isinstance(read, str):
        if vanished:
            read = "the run directory vanished during the run (removed from outside?)"
        reason = no_grade_reason(ending, read)
        log.warning("the run has no grade: %s", reason)
        result = Result(
            patch_result=PatchResult(status="error", error_msg=reason, error_source="harness"),
            runtime_result=RuntimeResult(),
            config=config,
        )
        write_json(run_dir / contract.RESULT_FILE, result)
    else:
        fields, result = read
        # Written from the file's own fields so that what this runner does not
        # know about survives; only `config` is the runner's.
        fields["config"] = msgspec.to_builtins(config)
        write_json(run_dir / contract.RESULT_FILE, fields)
    # Read after the grade was collected: a person who used the run's container
    # before now may have changed what was graded.
    touched = touched_at(run_dir)
    patch = result.patch_result
    if ending.failure and patch.status == "error" and not isinstance(read, str):
        # The container's own error grade, and what the runner saw fail beside it (the
        # engine gone at clean-up): the summary says both, so the outcome has its reason.
        said = [reason for reason in (patch.error_msg, ending.failure) if reason]
        patch = msgspec.structs.replace(patch, error_msg="; ".join(said))
    usage = gateway.usage if gateway is not None else None
    provider_down = usage is not None and usage.provider_down and usage.refused_for_concurrency == 0
    outcome = outcome_of(
        ending,
        result,
        budget_exceeded=usage is not None and usage.refused_for_budget > 0,
        provider_down=provider_down,
    )
    summary = Summary(
        task=task,
        config=config,
        patch_result=patch,
        runtime_result=result.runtime_result,
        run_id=run_id,
        started_at=started_at,
        spend=gateway.spend if gateway is not None else None,
        outcome=outcome,
        reason=infra_reason(outcome, result, provider_down),
        provenance=provenance,
        usage=gateway.usage if gateway is not None else None,
        touched=touched is not None,
        touched_at=touched,
        plugin_results=plugin_results(run_dir, config),
    )
    write_json(run_dir / contract.SUMMARY_FILE, summary)
    return summary
