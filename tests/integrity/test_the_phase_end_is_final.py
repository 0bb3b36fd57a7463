"""Issue 13, hole 6: in-flight requests and leftovers cross the end of the agent phase.

Rule (docs/integrity.md): no code the agent wrote or configured runs after the agent
phase except inside a check, as `sse-runner`; agent-facing listeners refuse every
tool once the phase is over; what the agent left in shared writable places is gone
before grading.

One run of the `late-request` agent at difficulty 2 (agents/late-request/): its
build, still running when the agent exits, completes a bash request after the
phase; its files and a shared memory segment wait for grading, where the same
planted code, run as `sse-runner` by the grading build, reports what it sees.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import PYARCHIVE, Finished, Runs

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def late(runs: Runs) -> Finished:
    done = runs.run(PYARCHIVE, "late-request", difficulty=2)
    assert done.returncode == 0, done.why()
    assert done.report()["headers sent"] is True, done.why()
    return done


def said(done: Finished, key: str) -> list[Any]:
    """What the planted code reported under `key`, in every check."""
    lines = done.hook_lines()
    assert all("failed" not in line.data for line in lines), lines
    return [line.data[key] for line in lines if key in line.data]


def test_a_bash_request_completed_after_the_phase_is_refused(late: Finished) -> None:
    """Hole 6: a bash request whose headers came in the agent phase and whose body came
    after it never runs (the gate holds after the body, not only at the headers).
    Rule: agent-facing listeners refuse every tool once the agent phase is over."""
    ran = late.archive / "hole6-late-bash"
    assert not ran.exists(), (
        f"the late command ran; the daemon answered {said(late, 'late bash answer')}"
    )
    answers = said(late, "late bash answer")
    assert all(" 200 " not in answer.split("\r\n", 1)[0] for answer in answers), answers


def test_no_runner_process_of_a_check_outlives_the_agent_phase(late: Finished) -> None:
    """Hole 6: a check still running when the agent exits keeps no `sse-runner`
    process into the time after the phase. Rule: no code the agent wrote runs after
    the agent phase except inside a check (one started by grading)."""
    assert said(late, "alive after the phase") == []


def test_nothing_of_the_agent_survives_into_grading(late: Finished) -> None:
    """Hole 6: in grading, no `model` process runs (the bash tool's shell does not
    restart) and none of the agent's files in /tmp, /var/tmp, /dev/shm nor its SysV
    shared memory segment is left. Rule: `model` is killed again after every step
    that could start its code; what it left in shared writable places is gone."""
    seen = said(late, "grading sees")
    assert seen, "the planted code never ran in grading"
    for view in seen:
        assert view["model"] == [], view
        assert view["files"] == [], view
        assert view["shm"] == [], view
