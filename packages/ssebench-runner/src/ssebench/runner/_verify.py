"""What `ssebench dataset verify` expects of a task's two runs, and its verdict.

A task is sound when its reference patch passes every check the task has
(build, each PoC, the function tests, the intent tests) and the unchanged
project (the `dummy` agent) fails with every PoC still triggering. Anything
else makes it a broken task: its grade would say nothing about an agent.
"""

from __future__ import annotations

from typing import Final

from ssebench.spec import Message, Summary, Task

REFERENCE: Final = "reference"
"""The agent that applies the task's reference patch."""

DUMMY: Final = "dummy"
"""The agent that changes nothing."""

VERIFY_AGENTS: Final = (REFERENCE, DUMMY)


class RunVerdict(Message, kw_only=True, frozen=True):
    """One of a task's two runs as `dataset verify --json` shows it."""

    agent: str
    run_id: str | None
    outcome: str | None
    """The run's outcome, or None when it was not recorded."""
    pocs: str | None
    """PoCs passed / PoCs run, e.g. `2/2`."""


class TaskVerification(Message, kw_only=True, frozen=True):
    """One task's verdict as `dataset verify --json` prints it."""

    id: str
    sound: bool
    runs: list[RunVerdict]
    problems: list[str]
    """Why the task is broken, one line each; empty when it is sound."""


def _pocs(summary: Summary) -> str | None:
    grade = summary.patch_result
    if grade.pov_total is None:
        return None
    return f"{grade.pov_passed or 0}/{grade.pov_total}"


def reference_problems(task: Task, summary: Summary | None, error: str | None) -> list[str]:
    """Why the reference run does not show the reference patch passing every check."""
    if summary is None:
        return [f"reference run not recorded: {error or 'unknown error'}"]
    grade = summary.patch_result
    checks = task.config.checks()
    found = []
    if summary.outcome != "passed":
        detail = grade.error_msg or ""
        found.append(
            f"reference patch does not pass: outcome {summary.outcome}"
            + (f" ({detail})" if detail else "")
        )
    if "build" in checks and grade.build_success is not True:
        found.append("reference patch: the build check does not pass")
    if "poc" in checks and (
        grade.pov_total != len(task.config.files.poc) or grade.pov_passed != grade.pov_total
    ):
        found.append(
            f"reference patch: PoCs passed {_pocs(summary)} of {len(task.config.files.poc)}, "
            "every one must pass"
        )
    if "function_test" in checks and grade.func_test_success is not True:
        found.append("reference patch: the function tests do not pass")
    if "intent_test" in checks and grade.intent_test_success is not True:
        found.append("reference patch: the intent tests do not pass")
    return found


def dummy_problems(task: Task, summary: Summary | None, error: str | None) -> list[str]:
    """Why the dummy run does not show the unchanged project failing with every PoC triggering."""
    if summary is None:
        return [f"dummy run not recorded: {error or 'unknown error'}"]
    grade = summary.patch_result
    found = []
    if summary.outcome != "failed":
        found.append(
            f"the unchanged project does not fail: outcome {summary.outcome}"
            + (f" ({grade.error_msg})" if grade.error_msg else "")
        )
    total = len(task.config.files.poc)
    if "poc" not in task.config.checks():
        found.append("the task has no PoC check (scripts.run and files.poc), so nothing fails")
    elif grade.pov_total != total or grade.pov_passed != 0:
        found.append(
            f"the unchanged project: {grade.pov_passed}/{grade.pov_total} PoCs pass; "
            f"each of the {total} PoCs must trigger the bug (fail)"
        )
    return found


def verify_task(
    task: Task,
    runs: dict[str, tuple[Summary | None, str | None]],
) -> TaskVerification:
    """The verdict on a task from its reference and dummy runs (summary, or why none)."""
    reference, reference_error = runs.get(REFERENCE, (None, "it did not run"))
    dummy, dummy_error = runs.get(DUMMY, (None, "it did not run"))
    problems = [
        *reference_problems(task, reference, reference_error),
        *dummy_problems(task, dummy, dummy_error),
    ]
    verdicts = [
        RunVerdict(
            agent=agent,
            run_id=summary.run_id if summary else None,
            outcome=summary.outcome if summary else None,
            pocs=_pocs(summary) if summary else None,
        )
        for agent, summary in ((REFERENCE, reference), (DUMMY, dummy))
    ]
    return TaskVerification(id=task.id, sound=not problems, runs=verdicts, problems=problems)


def unrun_task(task_id: str, problems: list[str]) -> TaskVerification:
    """The verdict on a task broken before anything ran (`dataset validate`'s problems)."""
    return TaskVerification(id=task_id, sound=False, runs=[], problems=problems)
