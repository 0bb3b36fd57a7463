"""`ssebench report`: the numbers (Wilson intervals, outcomes by the rule), the files, bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from ssebench.runner._report import build_report, spread, tokens_of, wilson
from ssebench.spec import EvalRecord, EvalSettings, EvalSlot, encode_json

Cli = Callable[..., Result]


@pytest.mark.parametrize(
    ("passed", "counted", "low", "high"),
    [
        # Reference values: Wilson score interval, z = 1.96.
        (4, 4, 0.5101, 1.0),
        (0, 4, 0.0, 0.4899),
        (5, 10, 0.2366, 0.7634),
        (81, 263, 0.2553, 0.3662),
    ],
)
def test_the_interval_is_wilsons(passed: int, counted: int, low: float, high: float) -> None:
    interval = wilson(passed, counted)

    assert interval is not None
    assert interval.low == pytest.approx(low, abs=1e-4)
    assert interval.high == pytest.approx(high, abs=1e-4)


def test_nothing_counted_has_no_rate_and_no_interval() -> None:
    assert wilson(0, 0) is None


def test_tokens_are_the_total_or_the_sum_of_the_counts() -> None:
    assert tokens_of({"total_tokens": 120, "prompt_tokens": 100}) == 120
    assert tokens_of({"prompt_tokens": 100, "completion_tokens": 20}) == 120
    assert tokens_of(None) is None
    assert tokens_of({"cost": 1}) is None


def test_a_spread_of_nothing_has_only_its_count() -> None:
    assert spread([]).mean is None
    assert spread([3.0, 1.0, 2.0]).median == 2.0


def _summary(task: str, agent: str, outcome: str, **extra: object) -> dict[str, object]:
    status = {"passed": "passed", "infra_error": "error", "grader_error": "error"}.get(
        outcome, "failed"
    )
    return {
        "task": task,
        "config": {
            "agent": agent,
            "model": "none",
            "mode": "sandbox",
            "backend": "fake",
            "difficulty": 2,
            "timeout": 60,
            "egress": "restricted",
            "reference_run": False,
            "keep": False,
        },
        "patch_result": {
            "status": status,
            "build_success": outcome != "grader_error",
            "pov_passed": 1 if outcome == "passed" else 0,
            "pov_total": 1,
        },
        "runtime_result": {"agent_duration": 10.0},
        "run_id": "x",
        "started_at": "2025-01-02T03:04:05+00:00",
        "outcome": outcome,
        **extra,
    }


def write_eval(root: Path, outcomes: list[tuple[str, str, str | None]]) -> Path:
    """An evaluation folder whose cells (task, agent, outcome or None: never ran) are recorded."""
    slots = []
    for number, (task, agent, outcome) in enumerate(outcomes):
        run_ids = []
        if outcome is not None:
            run_id = f"run-{number}"
            run_dir = root / "results" / task / "none" / agent / run_id
            run_dir.mkdir(parents=True)
            extra = {"spend": 0.5, "usage": {"total_tokens": 1000}}
            (run_dir / "summary.json").write_text(
                json.dumps(_summary(task, agent, outcome, **extra))
            )
            run_ids = [run_id]
        slots.append(EvalSlot(task=task, agent=agent, model="none", repeat=1, run_ids=run_ids))
    settings = EvalSettings(
        dataset="/d",
        tasks=sorted({task for task, _, _ in outcomes}),
        agents=sorted({agent for _, agent, _ in outcomes}),
        models=["none"],
        mode="sandbox",
        difficulty=2,
        repeat=1,
        timeout=60,
        check_timeout=60,
        egress="restricted",
        backend="fake",
    )
    record = EvalRecord(
        eval_id="e", created_at="t", settings=settings, results=str(root / "results"), slots=slots
    )
    folder = root / "evals" / "e"
    folder.mkdir(parents=True)
    (folder / "eval.json").write_bytes(encode_json(record))
    return folder


def test_the_pass_rate_counts_by_the_rule(tmp_path: Path) -> None:
    outcomes: list[tuple[str, str, str | None]] = [
        (f"t{number}", "a", outcome)
        for number, outcome in enumerate(
            [
                "passed",
                "passed",
                "failed",
                "agent_timeout",
                "budget_exceeded",
                "infra_error",
                "grader_error",
                "stopped",
                None,
            ]
        )
    ]
    folder = write_eval(tmp_path, outcomes)
    from ssebench.runner._eval_plan import read_record

    report = build_report(read_record(folder))

    (group,) = report.groups
    assert group.runs == 9
    assert (group.pass_rate.passed, group.pass_rate.counted) == (2, 5)
    assert group.outcomes["not run"] == 1
    assert group.outcomes["stopped"] == 1
    # Checks over the counted runs only.
    assert (group.checks["poc"].passed, group.checks["poc"].counted) == (2, 5)
    assert group.checks["intent_test"].counted == 0
    assert group.spend.total == pytest.approx(4.0)
    assert group.tokens.total == 8000
    assert group.agent_seconds.count == 8
    assert {cell.task: cell.outcomes for cell in report.grid}["t8"] == ["not run"]


def test_report_writes_the_page_markdown_and_json(tmp_path: Path, cli: Cli) -> None:
    folder = write_eval(tmp_path, [("t1", "reference", "passed"), ("t1", "dummy", "failed")])

    outcome = cli("report", str(folder))

    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.split() == [
        str(folder / "report.html"),
        str(folder / "report.md"),
        str(folder / "report.json"),
    ]
    page = (folder / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "100.0% (1/1, 95% CI 20.7%-100.0%)" in page
    assert "http" not in page
    assert "| reference / none | 100.0% (1/1" in (folder / "report.md").read_text()
    assert json.loads((folder / "report.json").read_text())["eval_id"] == "e"


def test_report_json_prints_and_writes_nothing(tmp_path: Path, cli: Cli) -> None:
    folder = write_eval(tmp_path, [("t1", "dummy", "failed")])

    outcome = cli("report", "--json", str(folder))

    assert outcome.exit_code == 0, outcome.stderr
    assert json.loads(outcome.stdout)["groups"][0]["outcomes"]["failed"] == 1
    assert sorted(path.name for path in folder.iterdir()) == ["eval.json"]


def test_report_of_a_folder_without_an_evaluation_is_one_line(tmp_path: Path, cli: Cli) -> None:
    outcome = cli("report", str(tmp_path))

    assert outcome.exit_code == 1
    assert outcome.stderr == (
        f"ssebench: {tmp_path} is not an evaluation's folder: it has no eval.json\n"
    )


def test_a_touched_run_is_left_out_of_pass_rates_unless_asked(tmp_path: Path, cli: Cli) -> None:
    folder = write_eval(tmp_path, [("t1", "a", "passed"), ("t2", "a", "failed")])
    summary_path = tmp_path / "results" / "t1" / "none" / "a" / "run-0" / "summary.json"
    touched = json.loads(summary_path.read_text())
    touched.update(touched=True, touched_at="2025-01-02T03:05:00+00:00")
    summary_path.write_text(json.dumps(touched))

    default = json.loads(cli("report", "--json", str(folder)).stdout)
    included = json.loads(cli("report", "--json", "--include-touched", str(folder)).stdout)

    (group,) = default["groups"]
    assert (group["pass_rate"]["passed"], group["pass_rate"]["counted"]) == (0, 1)
    assert group["outcomes"]["touched"] == 1
    (group,) = included["groups"]
    assert (group["pass_rate"]["passed"], group["pass_rate"]["counted"]) == (1, 2)
