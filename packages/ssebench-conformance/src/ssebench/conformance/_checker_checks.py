"""The checks of a checker pair (`SidecarPair.checker`, docs/integrity.md), the shape of every run
the runner starts, in both modes: the agent's container holds `model` alone, with no
capability and without the results; the checker learns the agent's exit status from the
backend, and its end is the run's.

The probe image stands in for SSEBench's runtime (probe/runtime.sh): the launcher's
stand-in writes what it sees into the archive (`agent-view.txt`) before it runs the probe,
the checker's writes the status the backend reported into `result.json`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Final

from ssebench.conformance._harness import Harness
from ssebench.spec import BackendError, ContainerRole, RunHandle, RunSpec, contract

VIEW_FILE: Final = "agent-view.txt"
"""In the run's archive: what the agent container's launcher stand-in saw."""

_WAIT: Final = 120.0


def _finished(h: Harness, spec: RunSpec, handle: RunHandle) -> tuple[int, Path]:
    """Wait for a probe pair and copy its results out: its status and run directory."""
    status = h.backend.wait(handle, timeout=_WAIT)
    dest = Path(spec.results.source)
    h.backend.collect_results(handle, dest)
    return status, dest


def a_checker_pairs_agent_runs_as_model_alone_without_capabilities_or_the_results(
    h: Harness,
) -> None:
    spec, handle = h.start("talk", checker=True)
    _, dest = _finished(h, spec, handle)
    view = (dest / contract.RUN_ARCHIVE / VIEW_FILE).read_text().splitlines()
    model = contract.MODEL_UID
    assert view[0] == f"uid {model} gid {model}", view
    capabilities = {
        line.split(":")[0]: int(line.split()[1], 16) for line in view if line.startswith("Cap")
    }
    assert capabilities == {"CapPrm": 0, "CapEff": 0, "CapBnd": 0}, view
    assert [line for line in view if line.startswith("process uid")] == [f"process uid {model}"], (
        view
    )
    assert "results absent" in view, view


def a_checker_pair_ends_with_its_checker_told_the_agents_exit_status(h: Harness) -> None:
    spec, handle = h.start("talk", checker=True, env={"PROBE_EXIT": "3"})
    status, dest = _finished(h, spec, handle)
    assert status == 0, f"the run's status is the checker's (0), not {status}"
    assert json.loads((dest / contract.RESULT_FILE).read_text()) == {
        "agent_status": 3,
        "checker_uid": 0,
    }


def commands_in_a_checker_pairs_agent_container_run_as_model_only(h: Harness) -> None:
    """`exec_argv` reaches the agent container as `model` (its own user), refuses any other
    user there, and reaches the checker as whoever is asked for."""
    _, handle = h.start("sleep", checker=True)

    def uid(user: str | None, container: ContainerRole) -> str:
        argv = h.backend.exec_argv(handle, ["id", "-u"], user=user, container=container)
        return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout

    assert uid(None, "agent") == f"{contract.MODEL_UID}\n"
    assert uid("root", "task") == "0\n"
    for user in ("root", "0", "0:0", f"{contract.MODEL_USER}:root", "nobody"):
        try:
            h.backend.exec_argv(handle, ["true"], user=user, container="agent")
        except BackendError:
            continue
        raise AssertionError(f"a command as {user!r} in the agent container was not refused")
