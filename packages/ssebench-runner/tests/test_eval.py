"""`ssebench eval` on the fake backend: the cross product, concurrency, resume, retries,
outcomes, Ctrl-C."""

from __future__ import annotations

import hashlib
import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typing_extensions import override

from ssebench.conformance.fake import FakeBackend, FakeContainer, FakeImage, Program
from ssebench.runs import scan_results
from ssebench.spec import Backend, BackendError, ImageRequest, Images, contract

from .conftest import TASK_CONFIG, TASK_ID, write_task
from .fakes import FAILED_RESULT, PASSED_RESULT, REFERENCE_PATCH, send_signal_when

Cli = Callable[..., Result]
UseBackend = Callable[[Backend[Any]], None]

SECOND_TASK = "second-task"


def result_with(**changes: Any) -> bytes:
    """PASSED_RESULT with fields of patch_result / runtime_result replaced."""
    patch = {**PASSED_RESULT["patch_result"], **changes.get("patch", {})}
    runtime = {**PASSED_RESULT["runtime_result"], **changes.get("runtime", {})}
    return json.dumps({"patch_result": patch, "runtime_result": runtime}).encode()


def graded(data: bytes, *, wait_for_stop: bool = False, hold: float = 0.0) -> Program:
    def program(container: FakeContainer) -> int:
        container.write(f"{contract.RESULTS_DIR}/result.json", data)
        if wait_for_stop:
            container.wait_for_stop()
            return 143
        time.sleep(hold)
        return 0

    return program


def reference_passes(container: FakeContainer) -> int:
    """The reference agent (it alone sees the patch) passes; any other fails."""
    try:
        container.read(contract.REFERENCE_PATCH)
        data = json.dumps(PASSED_RESULT).encode()
    except (FileNotFoundError, PermissionError):
        data = json.dumps(FAILED_RESULT).encode()
    container.write(f"{contract.RESULTS_DIR}/result.json", data)
    return 0


class PerRunFake(FakeBackend):
    """The shared fake, whose image's program is chosen per task and agent."""

    def __init__(self, choose: Callable[[str, str], Program]) -> None:
        super().__init__()
        self.choose = choose

    @override
    def prepare_images(self, request: ImageRequest) -> Images:
        images = super().prepare_images(request)
        program = self.choose(request.task.id, request.agent.name)
        # The checker's image holds the reference patch; the agent's plays the program.
        image = FakeImage(
            files={f"{contract.TASK_DIR}/diffs/patch.diff": REFERENCE_PATCH}, program=program
        )
        self.images[images.agent] = self.images[images.task_image()] = image
        return images


@pytest.fixture
def two_tasks(home: Path) -> Path:
    write_task(home / "datasets" / "demo", SECOND_TASK, TASK_CONFIG.replace(TASK_ID, SECOND_TASK))
    return home


def eval_args(*extra: str, agents: str = "reference,dummy", repeat: int = 2) -> list[str]:
    return ["eval", "--agents", agents, "--repeat", str(repeat), "--backend", "fake", *extra]


def the_eval() -> Path:
    (folder,) = Path("evals").iterdir()
    return folder


def record() -> dict[str, Any]:
    return json.loads((the_eval() / "eval.json").read_text())


def summary_of(slot: dict[str, Any], run_id: str | None = None) -> dict[str, Any]:
    run_id = run_id or slot["run_ids"][-1]
    path = Path("results") / slot["task"] / slot["model"] / slot["agent"] / run_id
    return json.loads((path / "summary.json").read_text())


def test_an_evaluation_runs_the_cross_product_and_records_each_run_as_run_does(
    two_tasks: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = PerRunFake(lambda task, agent: reference_passes)
    use_backend(backend)

    outcome = cli(*eval_args())

    assert outcome.exit_code == 0, outcome.stderr
    slots = record()["slots"]
    assert sorted((s["task"], s["agent"], s["model"], s["repeat"]) for s in slots) == sorted(
        (task, agent, "none", repeat)
        for task in (TASK_ID, SECOND_TASK)
        for agent in ("reference", "dummy")
        for repeat in (1, 2)
    )
    assert all(len(slot["run_ids"]) == 1 for slot in slots)
    assert len(backend.calls_to("start")) == 8
    for slot in slots:
        summary = summary_of(slot)
        assert summary["outcome"] == ("passed" if slot["agent"] == "reference" else "failed")
        provenance = summary["provenance"]
        assert provenance["agent_version"] == "1.0"
        assert provenance["dataset"] == "demo"
        assert provenance["dataset_version"] == "1"
        assert provenance["images"] == {
            "agent": f"fake/agent-{slot['agent']}/{slot['task']}:1",
            "environment": f"fake/tool/{slot['task']}:1",
        }
        assert "ssebench-runner" in provenance["ssebench"]
        assert len(provenance["inputs"]) == 64
    # Recorded exactly where `ssebench runs results` finds them.
    assert len(scan_results(Path("results"), lambda line: None)) == 8
    markdown = (the_eval() / "report.md").read_text()
    assert "| reference / none | 100.0% (4/4, 95% CI 51.0%-100.0%) |" in markdown
    assert "| dummy / none | 0.0% (0/4, 95% CI 0.0%-49.0%) |" in markdown


def test_concurrency_never_exceeds_j(two_tasks: Path, use_backend: UseBackend, cli: Cli) -> None:
    lock = threading.Lock()
    state = {"now": 0, "most": 0}

    def counted(container: FakeContainer) -> int:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        # Stay until 3 run at once (or a while): a 4th would show up in `most`.
        deadline = time.monotonic() + 1
        while state["now"] < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return reference_passes(container)

    use_backend(PerRunFake(lambda task, agent: counted))

    outcome = cli(*eval_args("-j", "3"))

    assert outcome.exit_code == 0, outcome.stderr
    assert state["most"] == 3


def test_the_same_command_again_skips_exactly_the_unchanged_graded_runs(
    two_tasks: Path, use_backend: UseBackend, cli: Cli
) -> None:
    def choose(task: str, agent: str) -> Program:
        if task == SECOND_TASK and agent == "dummy":
            return graded(result_with(patch={"status": "error", "error_source": "harness"}))
        return reference_passes

    backend = PerRunFake(choose)
    use_backend(backend)
    first = cli(*eval_args("--retries", "0"))
    assert first.exit_code == 0, first.stderr
    before = {(s["task"], s["agent"], s["repeat"]): s["run_ids"] for s in record()["slots"]}
    # The dummy agent's folder changes: its runs of the first task must run again.
    (two_tasks.parent / "agents" / "dummy" / "note.txt").write_text("changed\n")
    backend.calls.clear()

    second = cli(*eval_args("--retries", "0"))

    assert second.exit_code == 0, second.stderr
    after = {(s["task"], s["agent"], s["repeat"]): s["run_ids"] for s in record()["slots"]}
    rerun = sorted(key for key in after if after[key] != before[key])
    assert rerun == sorted(
        (task, "dummy", repeat) for task in (TASK_ID, SECOND_TASK) for repeat in (1, 2)
    )
    for key in rerun:
        assert after[key][:-1] == before[key]
    assert len(backend.calls_to("start")) == 4
    assert "4 to run, 4 skipped" in second.stderr
    assert "2 to rerun after infra_error" in second.stderr
    assert "2 to rerun because their inputs changed" in second.stderr
    assert f"{TASK_ID} reference none #1: passed" in second.stderr
    # The infra errors are fixed: --resume reruns those two only, then nothing at all.
    backend.calls.clear()
    backend.choose = lambda task, agent: reference_passes
    third = cli("eval", "--resume", str(the_eval()))
    assert third.exit_code == 0, third.stderr
    assert "2 to run, 6 skipped" in third.stderr
    assert backend.methods.count("start") == 2
    backend.calls.clear()
    fourth = cli(*eval_args("--retries", "0"))
    assert fourth.exit_code == 0, fourth.stderr
    assert "0 to run, 8 skipped" in fourth.stderr
    # Nothing started: the images were only asked for, once per task and agent.
    assert backend.methods == ["prepare_images"] * 4


class RebuildingFake(PerRunFake):
    """Its dummy agent's images get a new ID from `rebuilt` on (a new base image, say)."""

    rebuilt = False

    @override
    def prepare_images(self, request: ImageRequest) -> Images:
        images = super().prepare_images(request)
        if not (self.rebuilt and request.agent.name == "dummy"):
            return images
        self.images[f"{images.agent}-rebuilt"] = self.images[images.agent]
        return Images(agent=f"{images.agent}-rebuilt", environment=images.environment)


def test_an_image_rebuilt_from_unchanged_folders_makes_its_cells_run_again(
    two_tasks: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = RebuildingFake(lambda task, agent: reference_passes)
    use_backend(backend)
    assert cli(*eval_args()).exit_code == 0
    backend.rebuilt = True
    backend.calls.clear()

    again = cli(*eval_args())

    assert again.exit_code == 0, again.stderr
    assert "4 to run, 4 skipped" in again.stderr
    assert "4 to rerun because their inputs changed" in again.stderr
    started = {call[0].image for call in backend.calls_to("start")}
    assert started == {f"fake/agent-dummy/{task}:1-rebuilt" for task in (TASK_ID, SECOND_TASK)}


def test_an_infra_error_is_retried_up_to_retries(
    two_tasks: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = PerRunFake(lambda task, agent: reference_passes)
    starts = {"count": 0}

    def fail_twice(spec: Any) -> None:
        starts["count"] += 1
        if starts["count"] <= 2:
            raise BackendError("the platform has no room for the container")

    backend.hooks["start"] = fail_twice
    use_backend(backend)

    outcome = cli(*eval_args("--tasks", TASK_ID, "--retries", "1", agents="reference", repeat=1))

    assert outcome.exit_code == 0, outcome.stderr
    (slot,) = record()["slots"]
    assert len(slot["run_ids"]) == 2
    assert [summary_of(slot, run_id)["outcome"] for run_id in slot["run_ids"]] == [
        "infra_error",
        "infra_error",
    ]
    assert "(after 2 attempts)" in outcome.stderr

    starts["count"] = 0
    again = cli(*eval_args("--tasks", TASK_ID, "--retries", "2", agents="reference", repeat=1))

    assert again.exit_code == 0, again.stderr
    (slot,) = record()["slots"]
    assert [summary_of(slot, run_id)["outcome"] for run_id in slot["run_ids"]] == [
        "infra_error",
        "infra_error",
        "infra_error",
        "infra_error",
        "passed",
    ]


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        (graded(json.dumps(PASSED_RESULT).encode()), "passed"),
        (graded(json.dumps(FAILED_RESULT).encode()), "failed"),
        (
            graded(result_with(runtime={"agent_timeout": True}, patch={"status": "failed"})),
            "agent_timeout",
        ),
        (graded(result_with(patch={"status": "error", "error_source": "task"})), "grader_error"),
        (graded(result_with(patch={"status": "error", "error_source": "harness"})), "infra_error"),
        (graded(b""), "infra_error"),
        (graded(result_with(runtime={"stopped_by": "SIGTERM"})), "stopped"),
    ],
)
def test_each_kind_of_ending_gets_its_outcome_and_counts_by_the_rule(
    two_tasks: Path, use_backend: UseBackend, cli: Cli, program: Program, expected: str
) -> None:
    use_backend(PerRunFake(lambda task, agent: program))

    outcome = cli(
        *eval_args("--tasks", TASK_ID, "--retries", "0", "--json", agents="dummy", repeat=1)
    )

    assert outcome.exit_code == 0, outcome.stderr
    (slot,) = record()["slots"]
    assert summary_of(slot)["outcome"] == expected
    report = json.loads(outcome.stdout)
    (group,) = report["groups"]
    assert group["outcomes"][expected] == 1
    counted = expected in {"passed", "failed", "agent_timeout", "budget_exceeded"}
    assert group["pass_rate"]["counted"] == int(counted)
    assert group["pass_rate"]["passed"] == int(expected == "passed")


def test_ctrl_c_stops_and_records_the_runs_in_flight_and_starts_no_more(
    two_tasks: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = PerRunFake(
        lambda task, agent: graded(json.dumps(PASSED_RESULT).encode(), wait_for_stop=True)
    )
    both_started = threading.Event()

    def count(spec: Any) -> None:
        if len(backend.calls_to("start")) == 2:
            both_started.set()

    backend.hooks["start"] = count
    use_backend(backend)
    send_signal_when(both_started, signal.SIGINT)

    outcome = cli(*eval_args("-j", "2"))

    assert outcome.exit_code == 128 + signal.SIGINT, outcome.stderr
    assert "stopped by SIGINT" in outcome.stderr
    slots = [slot for slot in record()["slots"] if slot["run_ids"]]
    assert len(slots) == 2
    for slot in slots:
        summary = summary_of(slot)
        assert summary["outcome"] == "stopped"
    assert len(backend.calls_to("start")) == 2
    assert len(backend.calls_to("stop")) == 2
    # Resuming runs the stopped runs again, and those that never started.
    backend.choose = lambda task, agent: reference_passes
    again = cli("eval", "--resume", str(the_eval()))
    assert again.exit_code == 0, again.stderr
    assert "8 to run, 0 skipped" in again.stderr
    assert "2 to rerun because they were stopped" in again.stderr


def test_an_unknown_model_is_one_line_and_creates_nothing(
    two_tasks: Path, use_backend: UseBackend, cli: Cli
) -> None:
    use_backend(PerRunFake(lambda task, agent: reference_passes))

    outcome = cli(*eval_args("--models", "gpt-x"))

    assert outcome.exit_code == 1
    assert outcome.stderr == (
        f"ssebench: unknown model 'gpt-x': {two_tasks / 'models.yaml'} names none\n"
    )
    assert not Path("evals").exists()
    assert not Path("results").exists()


def test_resume_refuses_settings_of_its_own(two_tasks: Path, cli: Cli) -> None:
    outcome = cli("eval", "--resume", "evals/x", "--agents", "dummy")

    assert outcome.exit_code == 1
    assert "leave out --agents" in outcome.stderr


def test_a_second_ctrl_c_ends_at_once(two_tasks: Path, use_backend: UseBackend, cli: Cli) -> None:
    def ignores_stop(container: FakeContainer) -> int:
        container.wait_for_kill()
        return 137

    backend = PerRunFake(lambda task, agent: ignores_stop)
    started = backend.entered("start")
    stopping = backend.entered("stop")
    use_backend(backend)
    send_signal_when(started, signal.SIGINT, then=stopping, second=signal.SIGINT)

    outcome = cli(*eval_args("-j", "1"))

    assert outcome.exit_code == 128 + signal.SIGINT, outcome.stderr
    assert "ended by a second SIGINT" in outcome.stderr
    # The run was still being stopped: it has no outcome, and resume will run it again.
    (slot,) = [slot for slot in record()["slots"] if slot["run_ids"]]
    run_dir = Path("results") / slot["task"] / "none" / slot["agent"] / slot["run_ids"][0]
    assert not (run_dir / "summary.json").exists()


class PrebuiltOnly(PerRunFake):
    """A backend that cannot build (as k8s): every run must ask for published images."""

    builds_images = False


def test_a_backend_that_cannot_build_is_refused_without_prebuilt_and_nothing_is_made(
    two_tasks: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = PrebuiltOnly(lambda task, agent: reference_passes)
    use_backend(backend)

    outcome = cli(*eval_args())

    assert outcome.exit_code == 1
    assert outcome.stderr.splitlines()[-1] == (
        "ssebench: backend 'fake' cannot build images and runs prebuilt images only: "
        "add --prebuilt (or set SSEBENCH_PREBUILT=1)"
    )
    assert backend.calls_to("prepare_images") == [] and not Path("results").exists()


@pytest.mark.parametrize("how", ["option", "environment"])
def test_with_prebuilt_every_run_asks_for_published_images_and_a_resume_may_too(
    two_tasks: Path,
    use_backend: UseBackend,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    backend = PrebuiltOnly(lambda task, agent: reference_passes)
    use_backend(backend)
    if how == "environment":
        monkeypatch.setenv("SSEBENCH_PREBUILT", "1")
    flag = ["--prebuilt"] if how == "option" else []

    outcome = cli(*eval_args("--retries", "0", *flag))

    assert outcome.exit_code == 0, outcome.stderr
    requests = [call[0] for call in backend.calls_to("prepare_images")]
    assert len(requests) == 8 and all(request.prebuilt for request in requests)
    assert all(summary_of(slot)["outcome"] != "infra_error" for slot in record()["slots"])
    # --prebuilt is how this invocation gets images, not a setting of the evaluation.
    assert "prebuilt" not in record()["settings"]
    again = cli("eval", "--resume", str(the_eval()), *flag)
    assert again.exit_code == 0, again.stderr
    # Every run already stands: its images are asked for once per task and agent, published.
    requests = [call[0] for call in backend.calls_to("prepare_images")][8:]
    assert len(requests) == 4 and all(request.prebuilt for request in requests)


def configs() -> list[dict[str, Any]]:
    return [summary_of(slot)["config"] for slot in record()["slots"]]


def test_a_tool_layer_and_plugins_reach_every_run_and_the_evaluations_settings(
    two_tasks: Path, use_backend: UseBackend, cli: Cli
) -> None:
    from .test_plugins import write_plugins

    write_plugins(two_tasks)
    backend = PerRunFake(lambda task, agent: reference_passes)
    use_backend(backend)

    args = ("--tool-layer", "callers", "--plugin", "lister", "--plugin", "critic")
    outcome = cli(*eval_args("--retries", "0", *args, repeat=1))

    assert outcome.exit_code == 0, outcome.stderr
    requests = [call[0] for call in backend.calls_to("prepare_images")]
    assert len(requests) == 4
    assert all(r.tool_layer is not None and r.tool_layer.name == "callers" for r in requests)
    for config in configs():
        assert config["tool_layer"] == "callers"
        assert [plugin["name"] for plugin in config["plugins"]] == ["critic", "lister"]
    settings = record()["settings"]
    assert (settings["tool_layer"], settings["plugins"]) == ("callers", ["lister", "critic"])
    # Other settings, another evaluation; the same ones, the same (resumed, all skipped).
    assert cli(*eval_args("--retries", "0", *args, repeat=1)).exit_code == 0
    assert len(list(Path("evals").iterdir())) == 1
    assert backend.methods.count("start") == 4  # the resume started nothing
    again = [call[0] for call in backend.calls_to("prepare_images")][4:]
    assert [r.tool_layer.name if r.tool_layer else None for r in again] == ["callers"] * 4


def test_without_options_an_evaluation_runs_the_built_in_layer_and_the_enabled_plugins(
    two_tasks: Path, use_backend: UseBackend, cli: Cli
) -> None:
    from .test_plugins import write_plugins

    write_plugins(two_tasks)
    use_backend(PerRunFake(lambda task, agent: reference_passes))

    outcome = cli(*eval_args("--retries", "0", repeat=1))

    assert outcome.exit_code == 0, outcome.stderr
    for config in configs():
        assert config["tool_layer"] == "sandbox"
        assert [plugin["name"] for plugin in config["plugins"]] == ["probe"]
    # Settings at their defaults leave an evaluation's ID as it was before they existed.
    assert "tool_layer" in record()["settings"]
    from ssebench.runner._eval_plan import eval_id
    from ssebench.spec import EvalSettings, encode_json

    settings = EvalSettings(**{k: v for k, v in record()["settings"].items()})
    older = {k: v for k, v in record()["settings"].items() if k not in ("tool_layer", "plugins")}
    assert eval_id(settings) == the_eval().name
    assert the_eval().name == hashlib.sha256(encode_json(older)).hexdigest()[:16]


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            ("--tool-layer", "callers", "--prebuilt"),
            "--tool-layer cannot go with --prebuilt (or SSEBENCH_PREBUILT=1): published "
            "images carry the tool layer they were built with",
        ),
        (
            ("--plugin", "lister", "--mode", "sidecar"),
            "--plugin runs in sandbox mode only, not sidecar: use --mode sandbox",
        ),
        (
            ("--tool-layer", "nope"),
            "unknown tool layer 'nope': installed tool layers are ",
        ),
    ],
)
def test_a_tool_layer_or_plugin_that_cannot_go_is_refused_before_anything_is_made(
    two_tasks: Path, use_backend: UseBackend, cli: Cli, extra: tuple[str, ...], line: str
) -> None:
    from .test_plugins import write_plugins

    write_plugins(two_tasks)
    backend = PerRunFake(lambda task, agent: reference_passes)
    use_backend(backend)

    outcome = cli(*eval_args(*extra))

    assert outcome.exit_code == 1
    assert outcome.stderr.startswith(f"ssebench: {line}"), outcome.stderr
    assert outcome.stderr.count("\n") == 1
    assert backend.calls_to("prepare_images") == [] and not Path("results").exists()
