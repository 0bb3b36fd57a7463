"""Issue 13, hole 2: root changes a file's mode through a planted link.

Rule (docs/integrity.md): no privileged operation follows a path through a tree the agent
or `sse-runner` can write: fd-relative, or not at all.

The `link-race` agent's build makes a world-writable folder in /tmp; while root
cleans it up after the check, the agent's racer (as `model`) swaps folders in it for
links to /opt/agent/canary, a folder root owns with mode 0755. The build runs
through the bencher several times; the agent reports the canary after each.
"""

from __future__ import annotations

import pytest

from .conftest import PYARCHIVE, Runs

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(900)]

CANARY = {"uid": 0, "mode": "0o755"}


def test_root_never_changes_a_file_through_a_link_the_agent_swapped_in(runs: Runs) -> None:
    """Hole 2: the canary keeps its owner and mode whatever the racer swaps in. Rule:
    no privileged operation follows a path through a tree the agent or `sse-runner`
    can write."""
    done = runs.run(PYARCHIVE, "link-race", difficulty=2, timeout=300)

    assert done.returncode == 0, done.why()
    found = done.report()
    assert found["canary before"] == CANARY, found
    attempts = found["attempts"]
    assert attempts and all(attempt["build"] == 200 for attempt in attempts), found
    # The race was on: the build made its folder and the racer moved in.
    not_set_up = ("no folder appeared", "the build's folder never became writable")
    assert all(attempt["racer"] not in not_set_up for attempt in attempts), found
    changed = [attempt for attempt in attempts if attempt["canary"] != CANARY]
    assert changed == [], f"root changed the canary through a link: {changed}"
