"""The run's `outcome` in summary.json: one of seven, decided in docs/results.md's order."""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ssebench.conformance.fake import SKIP
from ssebench.runner._lifecycle import Runner
from ssebench.runner._plan import RunPlan
from ssebench.runner._record import RunEnding, outcome_of
from ssebench.spec import (
    BackendError,
    GatewayReport,
    PatchResult,
    PlatformUnavailableError,
    ProviderError,
    Result,
    RunConfig,
    RuntimeResult,
    Summary,
    Usage,
    decode_json,
)
from ssebench.spec.recording import record

from .conftest import run_dir
from .fakes import FAILED_RESULT, PASSED_RESULT, fake_backend, send_signal_when

ENDED = RunEnding(started=True, exit_status=0)
NOT_STARTED = RunEnding(started=False, failure="the run failed to start: no room")
SIGNALLED = RunEnding(started=True, exit_status=143, stopped_by=signal.SIGTERM)


def result(
    status: str = "passed",
    *,
    source: str | None = None,
    agent_timeout: bool = False,
    stopped_by: str | None = None,
) -> Result:
    return Result(
        patch_result=PatchResult(status=status, error_source=source),  # type: ignore[arg-type]
        runtime_result=RuntimeResult(agent_timeout=agent_timeout, stopped_by=stopped_by),
    )


@pytest.mark.parametrize(
    ("ending", "grade", "outcome"),
    [
        # The grade, when nothing else happened.
        (ENDED, result("passed"), "passed"),
        (ENDED, result("failed"), "failed"),
        # The agent was cut off: its grade is kept beside the outcome.
        (ENDED, result("passed", agent_timeout=True), "agent_timeout"),
        (ENDED, result("failed", agent_timeout=True), "agent_timeout"),
        # Errors: whose fault decides; a grade from before sources existed is the harness's.
        (ENDED, result("error", source="harness"), "infra_error"),
        (ENDED, result("error"), "infra_error"),
        (ENDED, result("error", source="task"), "grader_error"),
        (ENDED, result("error", source="harness", agent_timeout=True), "infra_error"),
        (ENDED, result("error", source="task", agent_timeout=True), "grader_error"),
        (NOT_STARTED, result("error"), "infra_error"),
        # Stopped: the runner's own signal, or a stop the container recorded (`runs stop`).
        (SIGNALLED, result("error"), "stopped"),
        (SIGNALLED, result("passed"), "stopped"),
        (ENDED, result("error", source="harness", stopped_by="SIGTERM"), "stopped"),
        (ENDED, result("error", source="task", stopped_by="SIGTERM"), "stopped"),
        # ... but a run the runner stopped because it lost it failed for the harness.
        (
            RunEnding(started=True, failure="the run could not be watched: gone"),
            result("error", source="harness", stopped_by="SIGTERM"),
            "infra_error",
        ),
    ],
)  # fmt: skip
def test_every_ending_maps_to_exactly_one_outcome_in_the_designs_order(
    ending: RunEnding, grade: Result, outcome: str
) -> None:
    assert outcome_of(ending, grade) == outcome


@pytest.mark.parametrize(
    ("ending", "grade", "outcome"),
    [
        (ENDED, result("passed"), "budget_exceeded"),
        (ENDED, result("failed"), "budget_exceeded"),
        # Before the agent's time limit, after the errors and a stop.
        (ENDED, result("failed", agent_timeout=True), "budget_exceeded"),
        (ENDED, result("error", source="harness"), "infra_error"),
        (ENDED, result("error", source="task"), "grader_error"),
        (SIGNALLED, result("passed"), "stopped"),
    ],
)  # fmt: skip
def test_a_used_up_budget_is_its_own_outcome_in_the_designs_order(
    ending: RunEnding, grade: Result, outcome: str
) -> None:
    assert outcome_of(ending, grade, budget_exceeded=True) == outcome


@pytest.mark.parametrize(
    ("ending", "grade", "outcome"),
    [
        # The provider failed the run's last calls: not the agent's doing, unless it passed.
        (ENDED, result("failed"), "infra_error"),
        (ENDED, result("failed", agent_timeout=True), "infra_error"),
        (ENDED, result("passed"), "passed"),
        (ENDED, result("error", source="task"), "grader_error"),
        (SIGNALLED, result("failed"), "stopped"),
    ],
)  # fmt: skip
def test_a_provider_that_failed_the_run_makes_it_infra_error_unless_it_passed(
    ending: RunEnding, grade: Result, outcome: str
) -> None:
    assert outcome_of(ending, grade, provider_down=True) == outcome


@pytest.mark.parametrize(
    ("usage", "outcome", "reason"),
    [
        (Usage(provider_down=True), "infra_error", "provider"),
        # It flooded the gateway past its cap: the provider's failures are the agent's.
        (Usage(provider_down=True, refused_for_concurrency=1), "failed", None),
        (Usage(provider_errors=[ProviderError(status=429, provider="x", at="t")]), "failed", None),
    ],
)
def test_the_summary_says_the_provider_ended_the_run_only_if_the_agent_kept_to_the_cap(
    tmp_path: Path, usage: Usage, outcome: str, reason: str | None
) -> None:
    (tmp_path / "result.json").write_text(
        json.dumps({"patch_result": {"status": "failed"}, "runtime_result": {}})
    )
    config = RunConfig(
        agent="a",
        model="m",
        mode="sandbox",
        backend="fake",
        difficulty=2,
        timeout=60,
        egress="restricted",
        reference_run=False,
        keep=False,
    )

    summary = record(
        tmp_path,
        ENDED,
        task="t",
        config=config,
        run_id="r",
        started_at="now",
        gateway=GatewayReport(spend=0.0, usage=usage),
    )

    assert (summary.outcome, summary.reason) == (outcome, reason)


def test_an_agent_that_exits_143_itself_is_not_a_stopped_run() -> None:
    # Only the entrypoint's record of a stop signal counts, never the exit status alone.
    assert outcome_of(RunEnding(started=True, exit_status=143), result("failed")) == "failed"


def read_summary() -> Summary:
    return decode_json((run_dir() / "summary.json").read_bytes(), Summary)


def with_fields(base: dict[str, Any], **sections: dict[str, Any]) -> bytes:
    return json.dumps(
        {**base, **{name: {**base[name], **values} for name, values in sections.items()}}
    ).encode()


@pytest.mark.parametrize(
    ("written", "outcome"),
    [
        (json.dumps(PASSED_RESULT).encode(), "passed"),
        (json.dumps(FAILED_RESULT).encode(), "failed"),
        (with_fields(FAILED_RESULT, runtime_result={"agent_timeout": True}), "agent_timeout"),
        (
            with_fields(PASSED_RESULT, patch_result={"status": "error", "error_source": "task"}),
            "grader_error",
        ),
        (
            with_fields(PASSED_RESULT, patch_result={"status": "error", "error_source": "harness"}),
            "infra_error",
        ),
        (
            with_fields(
                PASSED_RESULT,
                patch_result={"status": "error", "error_source": "harness"},
                runtime_result={"stopped_by": "SIGTERM"},
            ),
            "stopped",
        ),
        (b"", "infra_error"),
    ],
)
def test_the_summary_records_the_outcome_of_what_the_container_left(
    home: Path, make_plan: Callable[..., RunPlan], written: bytes, outcome: str
) -> None:
    summary = Runner(fake_backend(result=written)).run(make_plan())
    assert summary.outcome == outcome
    assert read_summary().outcome == outcome


def test_an_agent_timeout_keeps_its_grade_beside_the_outcome(
    home: Path, make_plan: Callable[..., RunPlan]
) -> None:
    written = with_fields(PASSED_RESULT, runtime_result={"agent_timeout": True})
    Runner(fake_backend(result=written)).run(make_plan())
    summary = read_summary()
    assert (summary.outcome, summary.patch_result.status) == ("agent_timeout", "passed")
    assert json.loads((run_dir() / "result.json").read_text())["patch_result"]["status"] == "passed"


def test_a_run_that_fails_to_start_is_an_infra_error(
    home: Path, make_plan: Callable[..., RunPlan]
) -> None:
    summary = Runner(fake_backend(fail_start=True)).run(make_plan())
    assert summary.outcome == "infra_error"
    assert summary.patch_result.error_source == "harness"


def test_a_run_whose_results_cannot_be_collected_is_an_infra_error(
    home: Path, make_plan: Callable[..., RunPlan]
) -> None:
    backend = fake_backend(collect_error=BackendError("the volume is gone"))
    assert Runner(backend).run(make_plan()).outcome == "infra_error"


def test_a_run_whose_directory_vanished_is_recorded_anyway_as_an_infra_error(
    home: Path, make_plan: Callable[..., RunPlan]
) -> None:
    plan = make_plan()
    backend = fake_backend()

    def removed_from_outside(*args: object) -> object:
        shutil.rmtree(plan.run_dir)
        return SKIP  # a bind-mounted run directory: nothing to collect from elsewhere

    backend.hooks["collect_results"] = removed_from_outside

    summary = Runner(backend).run(plan)

    assert summary.outcome == "infra_error"
    assert summary.patch_result.error_msg is not None
    assert "the run directory vanished during the run" in summary.patch_result.error_msg
    assert (plan.run_dir / "summary.json").is_file()


def test_a_run_the_engine_stopped_on_its_way_down_is_an_infra_error_not_stopped(
    home: Path, make_plan: Callable[..., RunPlan]
) -> None:
    """A restarting engine stops its containers with SIGTERM, as `runs stop` does; the
    engine gone at clean-up says whose SIGTERM it was."""
    written = with_fields(
        PASSED_RESULT,
        patch_result={"status": "error", "error_source": "harness"},
        runtime_result={"stopped_by": "SIGTERM"},
    )
    backend = fake_backend(result=written)

    def engine_gone(*args: object) -> object:
        raise PlatformUnavailableError("removing a run's container failed: Connection aborted")

    backend.hooks["cleanup"] = engine_gone

    summary = Runner(backend).run(make_plan())

    assert summary.outcome == "infra_error"
    assert summary.patch_result.error_msg is not None
    assert "the container platform went away during the run" in summary.patch_result.error_msg


def test_a_run_the_runner_stops_on_a_signal_is_stopped_even_with_a_grade(
    home: Path, make_plan: Callable[..., RunPlan]
) -> None:
    backend = fake_backend(block_until_stopped=True)
    send_signal_when(backend.entered("wait"), signal.SIGTERM)
    summary = Runner(backend).run(make_plan())
    assert (summary.outcome, summary.patch_result.status) == ("stopped", "passed")
