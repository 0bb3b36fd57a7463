"""An evaluation's numbers (`ssebench report --json`): pass rates with their uncertainty, per
agent and model, per task and per check, from the last run of each cell.

Outcomes count as docs/results.md says: pass rate = passed / (passed + failed +
agent_timeout + budget_exceeded); `infra_error`, `stopped` and
`grader_error` runs are shown and never counted. A run a person touched (the web
terminal, `runs exec`) before its grade was recorded is shown as `touched` and not
counted either, unless the report is asked to include it. The interval is Wilson's
score interval at 95%, which stays inside [0, 1] and behaves at 0% and 100%
with few runs, where the normal approximation does not.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import msgspec

from ssebench.runner._eval_plan import read_record
from ssebench.runner._run_dir import run_dir_path
from ssebench.spec import (
    EvalRecord,
    EvalSettings,
    Message,
    Outcome,
    PatchResult,
    RuntimeResult,
    contract,
)

Z_95: Final = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""

COUNTED: Final[frozenset[str]] = frozenset({"passed", "failed", "agent_timeout", "budget_exceeded"})
"""Outcomes that enter the pass rate's denominator."""

OUTCOMES: Final[tuple[str, ...]] = (
    "passed",
    "failed",
    "agent_timeout",
    "budget_exceeded",
    "grader_error",
    "infra_error",
    "stopped",
    "touched",
    "not run",
)
"""Every outcome a cell can show, in the order reports list them; `not run`: no recorded run,
`touched`: a person ran commands in the run's container before it was graded."""

CHECK_NAMES: Final = ("build", "poc", "function_test", "intent_test")
"""The checks, as reports name them."""


class Interval(Message, kw_only=True, frozen=True):
    """A 95% interval of a rate."""

    low: float
    high: float


class Rate(Message, kw_only=True, frozen=True):
    """How many of the runs that counted passed, with a 95% Wilson interval."""

    passed: int
    counted: int
    rate: float | None
    interval: Interval | None


class Spread(Message, kw_only=True, frozen=True):
    """A summary of some seconds or amounts."""

    count: int
    mean: float | None = None
    median: float | None = None
    min: float | None = None
    max: float | None = None
    total: float | None = None


class GroupReport(Message, kw_only=True, frozen=True):
    """One agent with one model over every task and repeat."""

    agent: str
    model: str
    runs: int
    pass_rate: Rate
    outcomes: dict[str, int]
    checks: dict[str, Rate]
    """Per check: passed over the counted runs in which it ran (PoCs: all fixed)."""
    agent_seconds: Spread
    spend: Spread
    tokens: Spread


class CellReport(Message, kw_only=True, frozen=True):
    """One task with one agent and model: the last outcome of each repeat."""

    task: str
    agent: str
    model: str
    outcomes: list[str]
    passed: int
    counted: int


class RunRow(Message, kw_only=True, frozen=True):
    """One cell's last run."""

    task: str
    agent: str
    model: str
    repeat: int
    run_id: str | None
    outcome: str
    attempts: int
    run_dir: str | None
    agent_seconds: float | None = None
    error: str | None = None


class EvalReport(Message, kw_only=True, frozen=True):
    """`report.json`: everything `ssebench report` shows."""

    eval_id: str
    settings: EvalSettings
    groups: list[GroupReport]
    grid: list[CellReport]
    runs: list[RunRow]


class _Recorded(msgspec.Struct, kw_only=True, frozen=True):
    """The part of `summary.json` a report reads; `usage` comes with the model gateway."""

    outcome: Outcome | None = None
    patch_result: PatchResult
    runtime_result: RuntimeResult
    spend: float | None = None
    usage: Any = None
    touched: bool = False


_decoder: Final = msgspec.json.Decoder(_Recorded)


def wilson(passed: int, counted: int, z: float = Z_95) -> Interval | None:
    """Wilson's score interval of `passed` out of `counted`; None when nothing counted."""
    if counted <= 0:
        return None
    share = passed / counted
    z2 = z * z
    centre = (share + z2 / (2 * counted)) / (1 + z2 / counted)
    half = z * math.sqrt(share * (1 - share) / counted + z2 / (4 * counted * counted))
    half /= 1 + z2 / counted
    return Interval(low=max(0.0, centre - half), high=min(1.0, centre + half))


def rate(passed: int, counted: int) -> Rate:
    """A Rate with its interval."""
    return Rate(
        passed=passed,
        counted=counted,
        rate=passed / counted if counted else None,
        interval=wilson(passed, counted),
    )


def spread(values: Iterable[float]) -> Spread:
    """Count, mean, median, min, max and total of `values`."""
    found = sorted(values)
    if not found:
        return Spread(count=0)
    return Spread(
        count=len(found),
        mean=statistics.fmean(found),
        median=statistics.median(found),
        min=found[0],
        max=found[-1],
        total=math.fsum(found),
    )


def tokens_of(usage: Any) -> float | None:
    """The tokens a run used, from the `usage` its summary records, if any.

    Takes `total_tokens` when given, else sums every `*_tokens` count.
    """
    if not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if isinstance(total, int | float):
        return float(total)
    counts = [
        value
        for key, value in usage.items()
        if key.endswith("_tokens") and isinstance(value, int | float)
    ]
    return float(sum(counts)) if counts else None


def _read(run_dir: str) -> _Recorded | None:
    try:
        with open(f"{run_dir}/{contract.SUMMARY_FILE}", "rb") as handle:  # noqa: PTH123 (hot loop)
            return _decoder.decode(handle.read())
    except (OSError, msgspec.DecodeError):
        return None


def _check_success(patch: PatchResult) -> dict[str, bool | None]:
    pocs = None if patch.pov_total is None else (patch.pov_passed or 0) >= patch.pov_total
    return {
        "build": patch.build_success,
        "poc": pocs,
        "function_test": patch.func_test_success,
        "intent_test": patch.intent_test_success,
    }


class _Group:
    def __init__(self) -> None:
        self.runs = 0
        self.outcomes: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self.checks: dict[str, list[int]] = {name: [0, 0] for name in CHECK_NAMES}
        self.seconds: list[float] = []
        self.spend: list[float] = []
        self.tokens: list[float] = []

    def add(self, outcome: str, recorded: _Recorded | None) -> None:
        self.runs += 1
        self.outcomes[outcome] += 1
        if recorded is None:
            return
        runtime = recorded.runtime_result
        if runtime.agent_duration is not None:
            self.seconds.append(runtime.agent_duration)
        if recorded.spend is not None:
            self.spend.append(recorded.spend)
        used = tokens_of(recorded.usage)
        if used is not None:
            self.tokens.append(used)
        if outcome in COUNTED:
            for name, success in _check_success(recorded.patch_result).items():
                if success is not None:
                    self.checks[name][1] += 1
                    self.checks[name][0] += int(success)

    def report(self, agent: str, model: str) -> GroupReport:
        counted = sum(self.outcomes[name] for name in COUNTED)
        return GroupReport(
            agent=agent,
            model=model,
            runs=self.runs,
            pass_rate=rate(self.outcomes["passed"], counted),
            outcomes=self.outcomes,
            checks={name: rate(done, ran) for name, (done, ran) in self.checks.items()},
            agent_seconds=spread(self.seconds),
            spend=spread(self.spend),
            tokens=spread(self.tokens),
        )


def _outcome(recorded: _Recorded | None, include_touched: bool) -> str:
    if recorded is None or recorded.outcome is None:
        return "not run"
    if recorded.touched and not include_touched:
        return "touched"
    return recorded.outcome


def build_report(record: EvalRecord, *, include_touched: bool = False) -> EvalReport:
    """The report of an evaluation, from the last recorded run of each cell.

    Args:
        record: its `eval.json`.
        include_touched: count runs a person touched by their own outcome instead of
            leaving them out as `touched`.

    Returns:
        The report; a cell whose last run left no readable summary is `not run`.
    """
    results = Path(record.results)
    groups: dict[tuple[str, str], _Group] = {}
    cells: dict[tuple[str, str, str], list[str]] = {}
    rows: list[RunRow] = []
    for agent in record.settings.agents:
        for model in record.settings.models:
            groups[agent, model] = _Group()
    for slot in record.slots:
        run_id = slot.run_ids[-1] if slot.run_ids else None
        recorded = None
        run_dir = None
        if run_id is not None:
            run_dir = str(run_dir_path(results, slot.task, slot.model, slot.agent, run_id))
            recorded = _read(run_dir)
        outcome = _outcome(recorded, include_touched)
        groups.setdefault((slot.agent, slot.model), _Group()).add(outcome, recorded)
        cells.setdefault((slot.task, slot.agent, slot.model), []).append(outcome)
        rows.append(
            RunRow(
                task=slot.task,
                agent=slot.agent,
                model=slot.model,
                repeat=slot.repeat,
                run_id=run_id,
                outcome=outcome,
                attempts=len(slot.run_ids),
                run_dir=run_dir,
                agent_seconds=None if recorded is None else recorded.runtime_result.agent_duration,
                error=None if recorded is None else recorded.patch_result.error_msg,
            )
        )
    return EvalReport(
        eval_id=record.eval_id,
        settings=record.settings,
        groups=[group.report(agent, model) for (agent, model), group in groups.items()],
        grid=[
            CellReport(
                task=task,
                agent=agent,
                model=model,
                outcomes=outcomes,
                passed=outcomes.count("passed"),
                counted=sum(1 for outcome in outcomes if outcome in COUNTED),
            )
            for (task, agent, model), outcomes in cells.items()
        ],
        runs=rows,
    )


def report_of(folder: Path, *, include_touched: bool = False) -> EvalReport:
    """The report of the evaluation in `folder` (see `build_report`).

    Raises:
        UserError: the folder holds no readable `eval.json`.
    """
    return build_report(read_record(folder), include_touched=include_touched)
