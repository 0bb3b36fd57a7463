"""Issue 13, hole 4: hidden material leaves through checks.

Rule (docs/integrity.md): hidden files are root-only until staged into a check's private
copy; a scratch copy never carries `.git` history; `sse-runner` cannot reach the
archive, and what a check left in shared writable places (/tmp, /var/tmp,
/dev/shm, …) is gone before `model` runs again.

The `hidden-copier` agent plants code in pyarchive that runs, as `sse-runner`, in
every check and copies out what it can (agents/hidden-copier/). One run at
difficulty 2 serves (a), (c) and (d); one at difficulty 0 serves (b).
"""

from __future__ import annotations

import pytest

from .conftest import PYARCHIVE, Finished, Hidden, Runs

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def copier_d2(runs: Runs) -> Finished:
    done = runs.run(PYARCHIVE, "hidden-copier", difficulty=2)
    assert done.returncode == 0, done.why()
    return done


@pytest.fixture(scope="module")
def copier_d0(runs: Runs) -> Finished:
    done = runs.run(PYARCHIVE, "hidden-copier", difficulty=0)
    assert done.returncode == 0, done.why()
    return done


def test_a_build_cannot_hand_the_run_script_to_the_agent(
    copier_d2: Finished, hidden: dict[str, Hidden]
) -> None:
    """Hole 4 (a): at difficulty <= 3 the agent's build prints /ssebench/scripts/run.sh
    and copies it into /tmp (a new file, and a world-writable file of the agent's);
    the agent then reads neither. Rule: hidden files are root-only until staged."""
    found = copier_d2.report()
    assert (found["build"], found["build code"]) == (200, 0), found
    leaks = hidden[PYARCHIVE].leaks_under(copier_d2.archive / "saw", kinds=("run.sh",))
    assert leaks == {}, copier_d2.why()


def test_hidden_material_a_check_copied_out_is_gone_after_it(copier_d0: Finished) -> None:
    """Hole 4 (b): at difficulty 0 the agent's code copies the staged PoC and the hidden
    tests into world-writable folders in /tmp, /var/tmp and /dev/shm during a check;
    nothing of them is left when the check is over. Rule: what a check left in shared
    writable places is gone before `model` runs again."""
    found = copier_d0.report()
    statuses = {name: status for name, status in found.items() if not name.startswith("left")}
    assert statuses == dict.fromkeys(statuses, 200), found
    lines = copier_d0.hook_lines()
    in_poc_runs = [line for line in lines if "/stage/" in str(line.data.get("argv"))]
    assert in_poc_runs, "the planted code never ran in a PoC run"
    left = {name: found[name] for name in found if name.startswith("left")}
    assert left and all(files == [] for check in left.values() for files in check.values()), left


def test_grading_cannot_put_hidden_material_into_the_archive(
    copier_d2: Finished, hidden: dict[str, Hidden]
) -> None:
    """Hole 4 (c): during grading, at any difficulty, the agent's code copies the PoCs and
    the hidden tests into a world-writable folder the agent made in $SSE_ARCHIVE; none
    of it reaches the host's archive/. Rule: `sse-runner` cannot reach the archive."""
    grade = copier_d2.grade()
    assert grade["pov_total"] == 2 and grade["intent_test_success"] is not None, grade
    leaks = hidden[PYARCHIVE].leaks_under(copier_d2.archive, kinds=("pocs", "hidden tests"))
    assert leaks == {}


def test_a_scratch_copy_carries_no_git_history(copier_d2: Finished) -> None:
    """Hole 4 (d): the agent's build looks for `.git` in its scratch copy and prints the
    history it finds, in the agent phase and in grading; there is none. Rule: a scratch
    copy never carries `.git` history."""
    lines = [line for line in copier_d2.hook_lines() if "git" in line.data]
    # The agent's build, and grading's build and PoC runs: one log each.
    assert len({line.log for line in lines}) >= 4, lines
    with_git = [line for line in lines if line.data["git"]]
    assert with_git == [], with_git[0]
