"""The agent's *image* cannot reach the grade (issue 38): in both modes, where the run is
two containers, the hostile-image agent's build replaces python3, git, tar, chmod,
chown, mkdir, make and the compiler with recorders that answer success and puts a
folder of its own first on PATH; none of it may run in the checker, or as anyone but
`model`. In sandbox mode, where the agent's image is the task's own userland, this
is the attack that graded a do-nothing agent `passed` before the checker had a
container of its own.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .conftest import PYARCHIVE, Runs

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(1800)]

_VOLATILE = re.compile(r"==\d+==|0x[0-9a-f]+")


def _grade(result: dict[str, Any]) -> dict[str, Any]:
    """What grading found, without what differs between any two runs."""
    patch = dict(result["patch_result"])
    if patch.get("error_log"):
        patch["error_log"] = _VOLATILE.sub("#", patch["error_log"])
    runtime = dict(result["runtime_result"])
    runtime.pop("agent_duration", None)
    return {"patch_result": patch, "runtime_result": runtime}


def test_a_hostile_image_is_graded_as_the_dummy_agent_and_runs_as_model_only(
    runs: Runs,
) -> None:
    hostile = runs.run(PYARCHIVE, "hostile-image", difficulty=1, timeout=300)
    dummy = runs.run(PYARCHIVE, "dummy", difficulty=1, timeout=300)
    for done in (hostile, dummy):
        assert done.returncode == 0, done.why()
    record = (hostile.archive / "hostile-record.txt").read_text().splitlines()
    # The positive control: the agent's own python3 is the recorder, and it ran as model.
    assert "1000 python3" in record, record
    assert {line.split()[0] for line in record} == {"1000"}, record
    # Every libz of the image outside SSEBench's runtime is the build's junk while the agent
    # runs, and the checker, which never runs the agent's image, graded all the same.
    assert (hostile.archive / "hostile-zlib.txt").read_text() == "broken\n"
    # No hidden folder in the agent container, and no process but model's there.
    assert (hostile.archive / "hostile-view.txt").read_text() == "uid 1000\n"
    graded = _grade(json.loads((hostile.run_dir / "result.json").read_text()))
    assert graded == _grade(json.loads((dummy.run_dir / "result.json").read_text()))
    assert graded["patch_result"]["status"] == "failed"
