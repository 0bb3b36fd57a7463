"""Issue 13, hole 1: agent code runs after the agent phase.

Rule (DESIGN.md §4): no code the agent wrote or configured runs after the agent phase
except inside a check, as `sse-runner`; `model` is killed again after every step that
could start its code, until `.graded` is written; git never honours the agent's
configuration, hooks, attributes or lazy fetch.

The `lazy-fetch` agent makes its repository a partial clone whose promisor remote's
upload-pack is its own command, and deletes an object `git log --all --name-status`
needs. That command would write `hole1-command-ran` into the archive and start a
`setsid` child that keeps writing `hole1-survivor` there while the run is graded.
"""

from __future__ import annotations

import pytest

from .conftest import PYARCHIVE, Runs

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(900)]


def test_no_command_the_agent_configured_in_its_git_ever_runs(runs: Runs) -> None:
    """Hole 1: the agent's promisor remote never runs, and no `model` process survives
    into grading; commits.log is still written. Rule: no code the agent wrote or
    configured runs after the agent phase (git never honours its lazy fetch)."""
    done = runs.run(PYARCHIVE, "lazy-fetch", difficulty=4)

    assert done.returncode == 0, done.why()
    assert done.report() == {"deleted": done.report()["deleted"], "gone": True}
    ran = done.archive / "hole1-command-ran"
    assert not ran.exists(), f"the agent's upload-pack ran: {ran.read_text()!r}"
    survivor = done.archive / "hole1-survivor"
    assert not survivor.exists(), (
        f"a model process survived into grading: {survivor.read_text()[-300:]!r}"
    )
    assert (done.run_dir / "commits.log").is_file(), done.why()
    assert done.grade()["status"] == "failed", done.why()
