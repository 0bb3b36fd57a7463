"""The walls of a run's two containers (issue 38; seed "Security properties", "In sidecar
mode, also"), in real containers, in both modes: one `sidecar-probe` run per mode and
difficulty (and one with open egress) on pyarchive, whose agent reports what `model`
finds from the agent container and through the daemon's bash tool in the checker
(agents/sidecar-probe/agent.py).

The rest of the suite runs in both modes too (`runs` in conftest.py); these tests are
about what only a pair has: two containers, the shared socket volume.
"""

from __future__ import annotations

from typing import Any

import pytest

from ssebench.daemon import ACTIONS, ALLOWED

from .conftest import HOST_SIDE, MODES, PYARCHIVE, STANDIN, Finished, Runs, Standin

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(1800)]

CASES = [(2, "restricted"), (0, "restricted"), (4, "restricted"), (2, "open")]
NOT_DONE = ("denied", "missing")


@pytest.fixture(scope="module")
def probe_runs(
    runs_by_mode: dict[str, Runs], internet_standin: Standin, host_listener: str
) -> dict[tuple[int, str], Finished]:
    """The runs of this module, made when first asked for."""
    return {}


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def probe(
    runs_by_mode: dict[str, Runs], made: dict[Any, Finished], mode: str, case: tuple[int, str]
) -> Any:
    if (mode, case) not in made:
        difficulty, egress = case
        made[mode, case] = runs_by_mode[mode].run(
            PYARCHIVE, "sidecar-probe", difficulty=difficulty, egress=egress, timeout=300
        )
    done = made[mode, case]
    assert done.returncode == 0, done.why()
    assert done.summary()["config"]["mode"] == mode
    return done.report(), done


@pytest.fixture
def restricted(runs_by_mode: dict[str, Runs], probe_runs: dict[Any, Finished], mode: str) -> Any:
    report, _ = probe(runs_by_mode, probe_runs, mode, (2, "restricted"))
    return report


def test_the_task_files_never_reach_the_agent_container(restricted: Any) -> None:
    """/ssebench and /ssebench-repo do not exist in the agent container, although the
    agent's Dockerfile made them (the seal takes them out); in the task container, where
    the daemon's bash tool runs, they do (and stay closed to model: test_bypass.py)."""
    assert restricted["here"]["exists"] == {"/ssebench": False, "/ssebench-repo": False}
    assert restricted["there"]["task paths"] == "/ssebench\n/ssebench-repo\n"


def test_only_model_runs_in_the_agent_container_and_the_results_are_not_there(
    restricted: Any,
) -> None:
    """The agent container holds no root process at all (its PID 1 is the launcher, as
    model), and the checker's results never reach it (issue 38)."""
    assert restricted["here"]["process uids"] == [1000]
    assert restricted["here"]["results mounted"] is False


def test_the_bash_tool_runs_as_model_in_the_task_container(restricted: Any) -> None:
    assert restricted["here"]["uid"] == 1000
    assert restricted["there"]["ids"] == "1000\n1000\n"


def test_model_reaches_the_agent_socket_but_not_the_admin_socket(restricted: Any) -> None:
    assert restricted["here"]["agent socket"] == "CONNECTED"
    assert restricted["here"]["admin"] == "denied"


def test_the_socket_volume_is_roots_and_nothing_in_it_can_be_moved_or_added(
    restricted: Any,
) -> None:
    """Root's, 0711: model cannot create files there, rename or remove either socket,
    or widen it; from the task container (bash tool) neither."""
    here = restricted["here"]
    assert (here["socket dir owner"], here["socket dir"]) == (0, "0o711")
    done = {what: outcome for what, outcome in here["sockets"].items() if outcome not in NOT_DONE}
    assert done == {}
    there = restricted["there"]["sockets"]
    assert there.count("Permission denied") == 2 and there.endswith("done\n"), there


def test_the_results_directory_is_root_only_in_both_containers(restricted: Any) -> None:
    assert restricted["here"]["results"] in NOT_DONE
    assert restricted["here"]["results parent"] in NOT_DONE
    there = restricted["there"]["results"]
    assert "Permission denied" in there and not there.endswith("status=0\n"), there


@pytest.mark.parametrize("difficulty", [0, 2, 4])
def test_the_difficulty_gate_holds_in_the_task_container(
    difficulty: int, runs_by_mode: dict[str, Runs], probe_runs: dict[Any, Finished], mode: str
) -> None:
    """At 0 every check runs (200); at 2 and 4 the withheld ones are refused (403)."""
    report, _ = probe(runs_by_mode, probe_runs, mode, (difficulty, "restricted"))
    expected = {action: 200 if action in ALLOWED[difficulty] else 403 for action in ACTIONS}
    assert report["checks"] == expected


def test_restricted_egress_reaches_neither_the_internet_nor_the_host_from_either_container(
    restricted: Any,
) -> None:
    here = restricted["here"]["network"]
    assert not any(outcome.startswith("REACHED") for outcome in here.values()), here
    for address in (STANDIN, f"{HOST_SIDE}:8099"):
        assert restricted["there"][f"network {address}"].endswith("FAILED\n")


def test_open_egress_reaches_the_internet_and_the_host_from_both_containers(
    runs_by_mode: dict[str, Runs], probe_runs: dict[Any, Finished], mode: str
) -> None:
    report, _ = probe(runs_by_mode, probe_runs, mode, (2, "open"))
    # The stand-in, and the host's listener (host_listener) that restricted runs must
    # not reach: so their "FAILED" is the wall's, not an address where nothing listens.
    for address in (STANDIN, f"{HOST_SIDE}:8099"):
        assert report["here"]["network"][address].startswith("REACHED"), report["here"]
        assert report["there"][f"network {address}"].endswith("REACHED\n"), report["there"]


def test_a_finished_pair_leaves_no_container_or_volume(
    runs_by_mode: dict[str, Runs], probe_runs: dict[Any, Finished], mode: str
) -> None:
    _, done = probe(runs_by_mode, probe_runs, mode, (2, "restricted"))
    assert runs_by_mode[mode].leftovers(done.run_id) == []
