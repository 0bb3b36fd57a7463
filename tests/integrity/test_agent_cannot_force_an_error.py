"""Issue 13, hole 3: the agent can force `error` instead of `failed`.

Rule (docs/integrity.md): nothing the agent does turns `failed` into `error`; `error` means
the harness or the engine failed. The graded diff always applies when the agent
changed only its tree, and each check's limit comes from what is left of the
evaluator's budget.
"""

from __future__ import annotations

import pytest

from .conftest import OWN_DATASET, PYARCHIVE, Runs, Started

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(1500)]


def test_a_file_1400_folders_deep_is_graded_not_an_error(runs: Runs) -> None:
    """Hole 3: a file 1400 folders deep in the agent's tree, and one its build leaves in
    /tmp, give `failed` or `passed`, never `error` (recursive copies and clean-ups).
    Rule: nothing the agent does turns `failed` into `error`."""
    done = runs.run(PYARCHIVE, "deep-tree", difficulty=4)

    assert done.returncode == 0, done.why()
    assert done.report() == {"depth": 1400}
    grade = done.grade()
    assert grade["status"] in ("failed", "passed"), grade
    assert grade["build_success"] is True, grade


def test_un_ignoring_a_file_of_the_image_gives_a_diff_that_applies(runs: Runs) -> None:
    """Hole 3: the task's image holds generated.txt, which .gitignore ignores; the agent
    un-ignores and changes it. The diff applies to the graded copy: not `error`.
    Rule: the graded diff always applies when the agent changed only its tree."""
    done = runs.run("integrity-ignored-file", "unignore", difficulty=4, dataset=OWN_DATASET)

    assert done.returncode == 0, done.why()
    assert "generated.txt" not in done.report()["gitignore"]
    grade = done.grade()
    assert grade["status"] in ("failed", "passed"), grade
    assert grade["build_success"] is True, grade
    assert "a line the agent added" in (done.run_dir / "final.patch").read_text()


@pytest.mark.slow
def test_a_patch_that_makes_a_poc_hang_is_failed_with_a_reason(hanging_poc_run: Started) -> None:
    """Hole 3: a PoC that hangs is stopped at its check's limit (`--check-timeout 10`)
    and graded `failed` with a reason, not `error`; the other checks still run. Rule:
    each check's limit comes from what is left of the evaluator's budget; nothing the
    agent does turns `failed` into `error`. (The run starts with the session.)"""
    done = hanging_poc_run.finish()

    assert done.returncode == 0, done.why()
    grade = done.grade()
    assert grade["status"] == "failed", grade
    assert grade["error_msg"].startswith("PoC 1 of 2 did not finish within 10 s"), grade
    assert grade["build_success"] is True, grade
    assert grade["func_test_success"] is not None, grade
    assert done.summary()["runtime_result"]["evaluator_timeout"] is False
