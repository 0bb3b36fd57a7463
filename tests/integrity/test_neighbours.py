"""A second run on the network cannot fetch the first run's reference patch (docs/agents.md:
the reference patch is served on the admin socket only; §9: a run reaches no other
run's daemon).

Both runs have `--egress open`: a restricted run has no network at all, so only an
open pair says anything. The first run waits in its agent phase; the test tells the
second, through the internet stand-in, where the first run's daemon listens.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from .conftest import PYARCHIVE, Hidden, Runs, Standin, container_address, wait_for_output

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(1200)]


def test_a_second_run_cannot_fetch_the_first_runs_reference_patch(
    runs: Runs, internet_standin: Standin, hidden: dict[str, Hidden]
) -> None:
    internet_standin.answer("done", "no")
    first = runs.start(PYARCHIVE, "neighbour-first", difficulty=4, egress="open", timeout=180)
    try:
        deadline = time.monotonic() + 600
        wait_for_output(runs, first.run_id, r"^neighbour-first: waiting", deadline)
        target = f"{container_address(runs, first.run_id, deadline)}:4263"
        # The address is right and the first run's daemon listens there: the host reaches it.
        with urllib.request.urlopen(f"http://{target}/version", timeout=10) as answer:
            assert answer.status == 200
        internet_standin.answer("targets", json.dumps([target]))
        second = runs.run(PYARCHIVE, "neighbour-second", difficulty=4, egress="open")
    finally:
        internet_standin.answer("done", "yes")
    first_done = first.finish()

    assert second.returncode == 0, second.why()
    found = second.report()
    assert found["targets"] == [target], found
    asked = found[target]
    assert set(asked) == {
        "GET /version",
        "GET /reference/patch",
        "POST /prepare_grading",
        "POST /admin/agent_exited",
        "POST /tool/bash",
    }
    for route in ("GET /reference/patch", "POST /prepare_grading", "POST /admin/agent_exited"):
        assert asked[route]["status"] in (None, 403), (route, asked[route])
    bash = asked["POST /tool/bash"]
    assert bash["status"] is None or bash["body"]["code"] != 0, bash
    assert hidden[PYARCHIVE].leaks_under(second.archive) == {}
    assert hidden[PYARCHIVE].leaks_in(second.log("agent.log").encode()) == []

    # The first run was neither ended nor graded early by its neighbour.
    assert first_done.returncode == 0, first_done.why()
    assert first_done.report()["saw done"] is True, first_done.why()
    summary = first_done.summary()
    assert summary["runtime_result"]["agent_exit_code"] == 0
    assert summary["patch_result"]["status"] == "failed", summary
