"""A hostile agent against the sandbox's walls, at difficulties 0, 2 and 4 on both demo tasks.

One run per task and difficulty: the `bypass` agent (agents/bypass/agent.py), as
`model`, tries to read the protected files directly and through the daemon's
bash tool, reach the admin socket, move or replace the agent-facing socket, run
the checks its difficulty withholds, read the reference patch, call the admin
routes and reach the internet stand-in, and reports every outcome. Each test
below judges one kind of attempt (docs/architecture.md, docs/agents.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from ssebench.daemon import ACTIONS, ALLOWED

from .conftest import DEMO_TASKS, STANDIN, Finished, Hidden, Runs, Standin

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(1800)]

CASES = [(task, difficulty) for difficulty in (0, 2, 4) for task in DEMO_TASKS]
IDS = [f"{task.split('-')[0]}-d{difficulty}" for task, difficulty in CASES]

NOT_READ = ("denied", "missing")


@pytest.fixture(scope="module")
def bypass_runs(runs: Runs, internet_standin: Standin) -> dict[tuple[str, int], Finished]:
    """The runs of this module, made when first asked for (one per task and difficulty)."""
    return {}


@pytest.fixture(params=CASES, ids=IDS)
def bypass(
    request: pytest.FixtureRequest, runs: Runs, bypass_runs: dict[Any, Finished]
) -> Finished:
    case: tuple[str, int] = request.param
    if case not in bypass_runs:
        task, difficulty = case
        bypass_runs[case] = runs.run(task, "bypass", difficulty=difficulty, timeout=300)
    done = bypass_runs[case]
    assert done.returncode == 0, done.why()
    return done


def test_the_agent_is_model_with_no_supplementary_groups(bypass: Finished) -> None:
    """The agent, and the daemon's bash tool, run as `model` (uid/gid 1000), no other group."""
    found = bypass.report()["identity"]
    assert (found["uid"], found["gid"]) == (1000, 1000), found
    # The engine starts the agent container as 1000:1000 and lists the primary group
    # as a supplementary one too: no group beyond model's own either way.
    own: tuple[list[Any], ...] = ([], [1000])
    assert found["groups"] in own, found
    assert found["status_groups"] in [[str(gid) for gid in groups] for groups in own], found
    assert found["bash_tool_ids"] == "1000\n1000\n1000\n", found


def test_the_protected_files_cannot_be_read_directly(bypass: Finished) -> None:
    """/ssebench, /ssebench-repo, the results, the scratch copies, the admin socket and
    PID 1's environment (the model key) are closed to `model`."""
    found = bypass.report()["direct"]
    got_through = {path: outcome for path, outcome in found.items() if outcome not in NOT_READ}
    # The agent container's PID 1 is the launcher, model's own process with the
    # environment the agent is given (test_sidecar.py: only model runs there).
    got_through.pop("/proc/1/environ", None)
    assert got_through == {}, bypass.why()


def test_the_protected_files_cannot_be_read_through_the_bash_tool(bypass: Finished) -> None:
    """The same through the daemon's bash tool: every attempt fails, no admin connection."""
    found = bypass.report()["via_bash"]
    got_through = {
        path: answer
        for path, answer in found.items()
        if answer["status"] != 200 or answer["body"]["code"] == 0
    }
    assert got_through == {}, bypass.why()
    assert all("CONNECTED" not in answer["body"]["stdout"] for answer in found.values())


def test_the_agent_facing_socket_cannot_be_moved_or_replaced(bypass: Finished) -> None:
    """/tmp/sse.sock (root's, in sticky /tmp) resists renaming, unlinking, replacing,
    binding and linking over it, directly and through the bash tool; the admin socket
    cannot even be reached. The daemon still answers on it afterwards."""
    found = bypass.report()["sockets"]
    done = [what for what, outcome in found.items() if outcome == "DONE"]
    assert done == [], found
    assert found["bash tool"]["body"]["code"] == 0, found["bash tool"]  # `ls` found it there
    assert found["after"] == {"uid": 0, "is_socket": True, "version": 200}, found


def test_withheld_checks_are_refused_and_allowed_ones_run(bypass: Finished) -> None:
    """The difficulty's gate (docs/agents.md), on the socket and the HTTP listener."""
    found = bypass.report()["checks"]
    difficulty = bypass.summary()["config"]["difficulty"]
    expected = {
        f"socket {action}": 200 if action in ALLOWED[difficulty] else 403 for action in ACTIONS
    }
    expected |= {f"http {action}": 403 for action in ACTIONS if action not in ALLOWED[difficulty]}
    assert {name: status for name, status in found.items() if name != "capabilities"} == expected


def test_the_reference_patch_and_the_admin_routes_are_refused(bypass: Finished) -> None:
    """GET /reference/patch, POST /prepare_grading, /admin/agent_exited and a grading
    check answer 403 on both agent-facing listeners."""
    found = bypass.report()["admin_routes"]
    assert {route: answer["status"] for route, answer in found.items()} == dict.fromkeys(found, 403)
    assert len(found) == 8


def test_the_internet_standin_cannot_be_reached(bypass: Finished) -> None:
    """A restricted run reaches neither the stand-in nor the host's side of its link
    (a refused connection would mean the network got there)."""
    found = bypass.report()["network"]
    reached = {
        target: outcome
        for target, outcome in found.items()
        if "REACHED" in outcome or "refused" in outcome.lower()
    }
    assert reached == {}, found
    assert STANDIN in found


def test_nothing_hidden_reaches_the_agent_and_the_run_is_graded(
    bypass: Finished, hidden: dict[str, Hidden], runs: Runs
) -> None:
    """Nothing of the hidden material is in what the agent kept or printed; the run is
    graded as usual and leaves nothing in the engine."""
    task = bypass.summary()["task"]
    assert hidden[task].leaks_under(bypass.archive) == {}
    assert hidden[task].leaks_in(bypass.log("agent.log").encode()) == []
    assert bypass.grade()["status"] == "failed", bypass.why()  # it changed nothing
    assert runs.leftovers(bypass.run_id) == []
