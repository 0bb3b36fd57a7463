"""`ssebench dataset verify`: the verdict on a task's reference and dummy runs, and the
demo dataset verified for real (docker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typing_extensions import override

from ssebench.conformance.fake import FakeBackend, FakeContainer, FakeImage
from ssebench.runner._verify import verify_task
from ssebench.spec import (
    ImageRequest,
    Images,
    PatchResult,
    RunConfig,
    RuntimeResult,
    Summary,
    Task,
    contract,
    load_dataset,
)

from .conftest import write_task

Cli = Callable[..., Result]

HOME = Path(__file__).parents[3]
DEMO = HOME / "datasets" / "demo"


def demo_task(task_id: str = "pyarchive-path-traversal") -> Task:
    return next(task for task in load_dataset(DEMO) if task.id == task_id)


def run(agent: str, outcome: str, **grade: object) -> Summary:
    status = outcome if outcome in ("passed", "failed") else "error"
    return Summary(
        task="t",
        config=RunConfig(
            agent=agent,
            model="none",
            mode="sandbox",
            backend="docker",
            difficulty=2,
            timeout=60,
            egress="restricted",
            reference_run=agent == "reference",
            keep=False,
        ),
        patch_result=PatchResult(status=status, **grade),  # type: ignore[arg-type]
        runtime_result=RuntimeResult(),
        run_id=f"{agent}-run",
        started_at="2026-01-01T00:00:00Z",
        outcome=outcome,  # type: ignore[arg-type]
    )


GOOD = {"build_success": True, "func_test_success": True, "intent_test_success": True}


def test_a_sound_task_passes_with_the_reference_and_fails_every_poc_with_dummy() -> None:
    verdict = verify_task(
        demo_task(),
        {
            "reference": (run("reference", "passed", pov_passed=2, pov_total=2, **GOOD), None),
            "dummy": (run("dummy", "failed", pov_passed=0, pov_total=2, **GOOD), None),
        },
    )

    assert verdict.sound and verdict.problems == []
    assert [(each.agent, each.outcome, each.pocs) for each in verdict.runs] == [
        ("reference", "passed", "2/2"),
        ("dummy", "failed", "0/2"),
    ]


def test_each_way_a_task_can_grade_wrong_is_a_problem() -> None:
    verdict = verify_task(
        demo_task(),
        {
            # The reference patch leaves the intent tests failing...
            "reference": (
                run(
                    "reference",
                    "failed",
                    build_success=True,
                    pov_passed=2,
                    pov_total=2,
                    func_test_success=True,
                    intent_test_success=False,
                ),
                None,
            ),
            # ...and one PoC does not trigger the bug on the unchanged project.
            "dummy": (run("dummy", "failed", pov_passed=1, pov_total=2, **GOOD), None),
        },
    )

    assert not verdict.sound
    assert verdict.problems == [
        "reference patch does not pass: outcome failed",
        "reference patch: the intent tests do not pass",
        "the unchanged project: 1/2 PoCs pass; each of the 2 PoCs must trigger the bug (fail)",
    ]


def test_a_run_that_was_not_recorded_or_broke_the_grader_makes_the_task_broken() -> None:
    verdict = verify_task(
        demo_task(),
        {
            "reference": (None, "the case image cannot be built: no such file"),
            "dummy": (run("dummy", "grader_error", error_msg="run.sh cannot start"), None),
        },
    )

    assert verdict.problems == [
        "reference run not recorded: the case image cannot be built: no such file",
        "the unchanged project does not fail: outcome grader_error (run.sh cannot start)",
        "the unchanged project: None/None PoCs pass; each of the 2 PoCs must trigger the bug "
        "(fail)",
    ]


@pytest.mark.docker
def test_verify_passes_both_demo_tasks(tmp_path: Path) -> None:
    # A process of its own, as a task author runs it: real images, real containers.
    env = {**os.environ, "SSEBENCH_HOME": str(HOME)}
    env.pop("SSEBENCH_AGENT_PATH", None)
    outcome = subprocess.run(
        [str(Path(sys.executable).parent / "ssebench"), "dataset", "verify", "-j", "2", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )

    assert outcome.returncode == 0, outcome.stderr[-3000:]
    verdicts = {entry["id"]: entry for entry in json.loads(outcome.stdout)}
    assert sorted(verdicts) == ["pyarchive-path-traversal", "tlvkit-heap-overflow"]
    for verdict in verdicts.values():
        assert verdict["sound"] and verdict["problems"] == []
        runs = {each["agent"]: each for each in verdict["runs"]}
        assert runs["reference"]["outcome"] == "passed"
        assert runs["dummy"]["outcome"] == "failed"
        assert runs["dummy"]["pocs"] == "0/2"
        assert runs["reference"]["pocs"] == "2/2"


def test_a_task_validate_finds_broken_is_reported_broken_without_a_run(
    home: Path, cli: Cli, tmp_path: Path
) -> None:
    dataset = tmp_path / "broken"
    dataset.mkdir()
    (dataset / "dataset.yaml").write_text('version: "1"\n')
    (write_task(dataset, "no-poc") / "sse" / "pocs" / "one.bin").unlink()

    outcome = cli("dataset", "verify", "--local", str(dataset), "--json")

    assert outcome.exit_code == 1
    [verdict] = json.loads(outcome.stdout)
    assert verdict["id"] == "no-poc" and not verdict["sound"] and verdict["runs"] == []
    assert "sse/pocs/one.bin (files.poc 'pocs/one.bin') is missing" in verdict["problems"]
    assert "ssebench: task no-poc: sse/pocs/one.bin" in outcome.stderr
    assert not (Path.cwd() / "results").exists()


def test_verify_refuses_an_unknown_task_in_one_line(home: Path, cli: Cli) -> None:
    outcome = cli("dataset", "verify", "--tasks", "nope")

    assert outcome.exit_code == 1
    assert outcome.stderr.startswith("ssebench: unknown task 'nope' in ")


def _grade(status: str, pocs_passed: int) -> bytes:
    checks = {"build_success": True, "func_test_success": True, "intent_test_success": True}
    return json.dumps(
        {
            "patch_result": {"status": status, "pov_passed": pocs_passed, "pov_total": 1, **checks},
            "runtime_result": {"agent_exit_code": 0},
        }
    ).encode()


class ScannedFake(FakeBackend):
    """Reference passes, dummy fails every PoC; its images' scan prints `found`."""

    def __init__(self, found: bytes) -> None:
        super().__init__()
        self.found = found

    @override
    def prepare_images(self, request: ImageRequest) -> Images:
        images = super().prepare_images(request)
        graded = _grade("passed", 1) if request.agent.name == "reference" else _grade("failed", 0)

        def program(container: FakeContainer) -> int:
            container.write(f"{contract.RESULTS_DIR}/result.json", graded)
            return 0

        # The checker's image holds the reference patch; the agent's plays the program.
        self.images[images.agent] = self.images[images.task_image()] = FakeImage(
            files={f"{contract.TASK_DIR}/diffs/patch.diff": b"--- a/x\n+++ b/x\n"},
            program=program,
        )
        return images

    @override
    def probe_image(
        self, image: str, argv: Sequence[str], env: dict[str, str], timeout: float = 600
    ) -> bytes:
        self._enter("probe_image", image, argv, env, timeout)
        return self.found


@pytest.mark.parametrize("leaky", [False, True], ids=["clean", "leaky"])
def test_a_leak_the_scan_finds_in_a_runs_image_makes_the_task_broken(
    home: Path, cli: Cli, use_backend: Callable[[Any], None], leaky: bool
) -> None:
    for script in ("build.sh", "run.sh", "test.sh"):
        (home / "datasets" / "demo" / "demo-task" / "sse" / script).chmod(0o755)
    backend = ScannedFake(b"LINE fix /srv/left/fix.txt\n" if leaky else b"")
    use_backend(backend)

    outcome = cli("dataset", "verify", "--backend", "fake", "--json")

    assert outcome.stdout, outcome.stderr
    [verdict] = json.loads(outcome.stdout)
    runs = {each["agent"]: each["outcome"] for each in verdict["runs"]}
    assert runs == {"reference": "passed", "dummy": "failed"}, outcome.stderr
    assert backend.methods.count("probe_image") == 2  # the reference's and dummy's images
    if not leaky:
        assert (outcome.exit_code, verdict["sound"], verdict["problems"]) == (0, True, [])
        return
    assert outcome.exit_code == 1
    assert not verdict["sound"]
    assert [problem.split(": ", 1)[1] for problem in verdict["problems"]] == [
        "/srv/left/fix.txt: lines the fix (sse/diffs/patch.diff) adds, readable by model"
    ] * 2
