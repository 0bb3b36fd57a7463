"""The grading budget: how long the evaluator may take, sized from the checks it runs.

Rule enforced (docs/integrity.md): nothing the agent does turns `failed` into
`error`. A patch can make any check run until it is stopped (a PoC that
loops forever, a test suite that hangs); that must cost the check, recorded
as failing, never the grade. So the evaluator's budget is sized to hold
every check at its full limit (`SSE_CHECK_TIMEOUT`), each check is sent
with its own limit taken from what is left of the budget (the evaluator's
`Deadline`), and the daemon stops it there. What still ends in `error` is
the harness's doing: a daemon that does not answer a check within its limit
and `CHECK_MARGIN`, or `prepare_grading` within `PREPARE_ALLOWANCE`.

Standard library only: the entrypoint loads this at start-up, while it must
stay small in memory.
"""

from __future__ import annotations

from typing import Final

PREPARE_ALLOWANCE: Final = 900.0
"""Seconds `prepare_grading` may take: ending the agent phase, a fresh check session,
the final diff taken and applied to the graded copy (its `git apply` alone may take 600 s)."""

CHECK_MARGIN: Final = 120.0
"""Seconds the daemon may take around one check beyond the check's own limit (killing
the runner's processes, clearing its files, removing the scratch copy) before the
evaluator stops waiting for the answer: the daemon is then taken as gone."""

GRADE_RESERVE: Final = 30.0
"""Seconds of the budget never handed to a check: what writing the grade needs."""

MIN_CHECK_LIMIT: Final = 1.0
"""A check is never sent with less: below it the budget is spent, and the harness says so
(`error`) instead of failing a check that had no time to run."""


def count_checks(
    *,
    can_build: bool,
    can_run_poc: bool,
    poc_count: int,
    has_function_test: bool,
    has_intent_test: bool,
) -> int:
    """How many check requests grading sends: the build, each PoC, each test suite.

    Args:
        can_build: the task has a build (the admin socket's `GET /capabilities`).
        can_run_poc: the task has PoCs and a run script.
        poc_count: how many PoCs (each is its own request).
        has_function_test: the task has function tests.
        has_intent_test: the task has hidden (intent) tests.

    Returns:
        The number of checks.
    """
    return (
        int(can_build)
        + (max(poc_count, 0) if can_run_poc else 0)
        + int(has_function_test)
        + int(has_intent_test)
    )


def grading_budget(checks: int, check_timeout: float) -> float:
    """The evaluator's time limit for a task with `checks` checks.

    It holds `prepare_grading`'s allowance, every check at its full limit plus the
    daemon's margin around it, and the reserve for writing the grade: a patch whose
    every check hangs still ends `failed`, each check stopped by the daemon at
    `check_timeout`. The agent's own limit (`TIMEOUT`) plays no part: it says nothing
    about how long the project's build and tests take, and a budget below the sum
    of the checks' limits let a hanging PoC spend it, which graded the run `error`.
    A large budget costs nothing when the checks end: every request also has its own
    limit (the check's plus `CHECK_MARGIN`), so a daemon that stops answering is found
    within one check, not at the end of the budget. Its bound on a run is the one the
    daemon already sets: each check at most `check_timeout`.

    Args:
        checks: how many checks grading runs (`count_checks`).
        check_timeout: one check's limit in seconds (`SSE_CHECK_TIMEOUT`).

    Returns:
        Seconds.
    """
    return PREPARE_ALLOWANCE + max(checks, 0) * (check_timeout + CHECK_MARGIN) + GRADE_RESERVE
