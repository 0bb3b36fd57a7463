"""The run's lifecycle: the order of the backend's calls, failures, signals, kept runs."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from ssebench.conformance.fake import FakeBackend
from ssebench.runner._lifecycle import Runner
from ssebench.runner._plan import RunPlan
from ssebench.runner._signals import SecondSignal
from ssebench.spec import Backend, BackendError, RunHandle, RunSpec, RunTimeoutError, contract

from .conftest import run_args, run_dir
from .fakes import fake_backend, send_signal_when

Cli = Callable[..., Result]
UseBackend = Callable[[Backend[Any]], None]


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def test_a_run_calls_the_backend_in_order(fake: FakeBackend, cli: Cli) -> None:
    outcome = cli(*run_args())

    assert outcome.exit_code == 0, outcome.stderr
    assert fake.methods == [
        "prepare_images",
        "copy_from_image",
        "start",
        "wait",
        "collect_results",
        "cleanup",
    ]


def test_a_sidecar_run_hands_the_backend_a_pair_and_records_its_mode(
    fake: FakeBackend, cli: Cli
) -> None:
    seen: list[RunSpec] = []
    fake.hooks["start"] = seen.append
    outcome = cli(*run_args("--mode", "sidecar"))

    assert outcome.exit_code == 0, outcome.stderr
    (spec,) = seen
    assert (spec.mode, spec.image) == ("sidecar", "fake/agent-dummy/sidecar:1")
    assert spec.sidecar is not None
    assert spec.sidecar.environment_image == "fake/tool-sidecar/demo-task:1"
    assert spec.env[contract.ENV_DAEMON_SOCKET] == contract.SIDECAR_DAEMON_SOCKET
    assert spec.sidecar.shared_env()[contract.ENV_DAEMON_SOCKET] == contract.SIDECAR_DAEMON_SOCKET
    assert contract.ENV_API_KEY not in spec.sidecar.environment_env()
    # Both containers hold the run's process limit (each as its own root process).
    assert spec.sidecar.environment_env()[contract.ENV_PIDS_LIMIT] == "1024"
    assert spec.env[contract.ENV_PIDS_LIMIT] == "1024"
    assert read(run_dir() / "summary.json")["config"]["mode"] == "sidecar"
    assert read(run_dir() / "run.json")["sidecar"]["run_id"] == "run-1"


def test_the_run_directory_has_its_skeleton_and_run_json_before_start(
    fake: FakeBackend, cli: Cli
) -> None:
    seen: dict[str, Any] = {}

    def look(spec: RunSpec) -> None:
        folder = Path(spec.results.source)
        seen["files"] = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))
        seen["result"] = (folder / "result.json").read_bytes()

    fake.hooks["start"] = look
    cli(*run_args())

    assert seen == {
        "files": ["archive", "result.json", "run.json"],
        "result": b"",
    }


def test_results_reach_the_run_directory_only_through_collect_results(
    fake: FakeBackend, cli: Cli
) -> None:
    seen: list[bytes] = []

    def look(handle: RunHandle, timeout: float | None) -> None:
        # Once the container has written its result and exited, the run directory
        # still holds the runner's empty placeholder.
        deadline = time.monotonic() + 10
        while fake.list_runs()[0].state != "exited" and time.monotonic() < deadline:
            time.sleep(0.01)
        (spec,) = fake.calls_to("start")[0]
        seen.append((Path(spec.results.source) / "result.json").read_bytes())

    fake.hooks["wait"] = look
    outcome = cli(*run_args())

    assert outcome.exit_code == 0, outcome.stderr
    assert seen == [b""]
    folder = run_dir()
    result = read(folder / "result.json")
    assert result["patch_result"]["status"] == "passed"
    assert result["config"]["agent"] == "dummy"
    assert result["evaluator_version"] == "9.9.9"
    assert (folder / "final.patch").is_file()
    assert (folder / "archive" / "dialog.jsonl").is_file()


def test_a_failed_start_still_writes_the_summary(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = fake_backend(fail_start=True)
    use_backend(backend)

    outcome = cli(*run_args())

    assert outcome.exit_code == 1, outcome.stderr
    assert backend.methods == ["prepare_images", "copy_from_image", "start"]
    summary = read(run_dir() / "summary.json")
    assert summary["patch_result"]["status"] == "error"
    assert summary["patch_result"]["error_msg"] == (
        "the run failed to start: the platform has no room for the container"
    )
    assert read(run_dir() / "result.json")["config"]["backend"] == "fake"
    assert (run_dir() / "reference.patch").is_file()
    assert (run_dir() / "run.json").is_file()


def test_an_empty_result_is_recorded_as_an_error_with_the_exit_status(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    use_backend(fake_backend(result=b"", exit_status=137))

    cli(*run_args())

    summary = read(run_dir() / "summary.json")
    assert summary["patch_result"]["status"] == "error"
    assert summary["patch_result"]["error_msg"] == (
        "the run left an empty result.json (container exit status 137); "
        "SIGKILL ended it from outside the run (docker kill, the engine, the OOM killer)"
    )


def test_a_missing_result_is_recorded_as_an_error(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    use_backend(fake_backend(remove_result=True, exit_status=1))

    cli(*run_args())

    summary = read(run_dir() / "summary.json")
    assert summary["patch_result"]["error_msg"] == (
        "the run left no result.json (container exit status 1)"
    )
    assert read(run_dir() / "result.json")["patch_result"]["status"] == "error"


def test_an_unreadable_result_is_recorded_as_an_error_and_kept_aside(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    use_backend(fake_backend(result=b'{"patch_result": {"status": "great"}}'))

    cli(*run_args())

    summary = read(run_dir() / "summary.json")
    assert summary["patch_result"]["status"] == "error"
    assert summary["patch_result"]["error_msg"].startswith(
        "the run left an unreadable result.json (result.json: "
    )
    assert (run_dir() / "result.json.unreadable").read_bytes() == (
        b'{"patch_result": {"status": "great"}}'
    )


def test_a_run_that_cannot_be_watched_is_stopped_collected_and_cleaned_up(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = fake_backend(wait_error=BackendError("lost the container"), result=b"")
    use_backend(backend)

    cli(*run_args())

    assert backend.methods == [
        "prepare_images",
        "copy_from_image",
        "start",
        "wait",
        "stop",
        "collect_results",
        "cleanup",
    ]
    assert read(run_dir() / "summary.json")["patch_result"]["error_msg"] == (
        "the run could not be watched: lost the container; the run left an empty result.json"
    )


def test_a_run_that_times_out_is_recorded_as_such(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    use_backend(fake_backend(wait_error=RunTimeoutError("past the deadline"), result=b""))

    cli(*run_args())

    assert read(run_dir() / "summary.json")["patch_result"]["error_msg"].startswith(
        "the run did not end in time: past the deadline"
    )


def test_results_that_cannot_be_collected_are_recorded_and_cleaned_up(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = fake_backend(collect_error=BackendError("the volume is gone"), exit_status=0)
    use_backend(backend)

    cli(*run_args())

    assert backend.methods[-2:] == ["collect_results", "cleanup"]
    assert read(run_dir() / "summary.json")["patch_result"]["error_msg"] == (
        "the results could not be collected: the volume is gone; "
        "the run left an empty result.json (container exit status 0)"
    )


def test_cleanup_runs_when_wait_is_interrupted(make_plan: Callable[..., RunPlan]) -> None:
    backend = fake_backend(wait_error=KeyboardInterrupt())

    with pytest.raises(KeyboardInterrupt):
        Runner(backend).run(make_plan())

    assert backend.methods[-2:] == ["wait", "cleanup"]


def test_a_signal_during_wait_stops_the_run_once_and_records_it(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = fake_backend(block_until_stopped=True, result=b"")
    use_backend(backend)
    send_signal_when(backend.entered("wait"), signal.SIGTERM)

    outcome = cli(*run_args())

    assert outcome.exit_code == 0, outcome.stderr
    assert backend.methods.count("stop") == 1
    assert backend.methods[-3:] == ["stop", "collect_results", "cleanup"]
    summary = read(run_dir() / "summary.json")
    assert summary["patch_result"]["error_msg"] == (
        "stopped by SIGTERM; the run left an empty result.json (container exit status 143)"
    )
    assert "SIGTERM: stopping the run" in outcome.stderr


def test_a_stopped_run_keeps_the_grade_its_container_wrote(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = fake_backend(block_until_stopped=True)
    use_backend(backend)
    send_signal_when(backend.entered("wait"), signal.SIGINT)

    cli(*run_args())

    assert read(run_dir() / "summary.json")["patch_result"]["status"] == "passed"


def test_a_second_signal_ends_the_cli(home: Path, use_backend: UseBackend, cli: Cli) -> None:
    backend = fake_backend(block_until_stopped=True, ignore_stop=True, result=b"")
    use_backend(backend)
    send_signal_when(
        backend.entered("wait"), signal.SIGINT, then=backend.entered("stop"), second=signal.SIGINT
    )
    # What the test process inherited: a run in the background starts with SIGINT ignored.
    inherited = signal.getsignal(signal.SIGINT)

    outcome = cli(*run_args())

    assert outcome.exit_code == 130
    assert backend.methods.count("stop") == 1
    assert backend.methods[-3:] == ["wait", "stop", "cleanup"]
    assert "collect_results" not in backend.methods
    assert outcome.stderr.strip().splitlines()[-1].startswith("ssebench: ended by a second SIGINT")
    summary = read(run_dir() / "summary.json")
    assert summary["patch_result"]["error_msg"] == (
        "stopped by SIGINT; ended by a second SIGINT before the results were collected; "
        "the run left an empty result.json"
    )
    assert signal.getsignal(signal.SIGINT) is inherited


def test_a_signal_while_the_run_starts_stops_it_once_it_exists(
    make_plan: Callable[..., RunPlan],
) -> None:
    backend = fake_backend(block_until_stopped=True, result=b"")

    def interrupted(_: object) -> None:
        signal.raise_signal(signal.SIGTERM)

    backend.hooks["start"] = interrupted

    summary = Runner(backend).run(make_plan())

    assert backend.methods.count("stop") == 1
    assert summary.patch_result.error_msg is not None
    assert summary.patch_result.error_msg.startswith("stopped by SIGTERM")


def test_the_signal_handlers_are_restored_after_the_run(
    make_plan: Callable[..., RunPlan],
) -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)

    Runner(fake_backend()).run(make_plan())

    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_second_signal_reaches_the_caller_of_the_runner(
    make_plan: Callable[..., RunPlan],
) -> None:
    backend = fake_backend(block_until_stopped=True, ignore_stop=True)
    send_signal_when(
        backend.entered("wait"), signal.SIGTERM, then=backend.entered("stop"), second=signal.SIGTERM
    )

    with pytest.raises(SecondSignal) as raised:
        Runner(backend).run(make_plan())

    assert raised.value.exit_status == 143


def test_a_kept_run_is_recorded_and_the_cli_returns(fake: FakeBackend, cli: Cli) -> None:
    outcome = cli(*run_args("--keep-container"))

    assert outcome.exit_code == 0, outcome.stderr
    spec = fake.calls_to("start")[0][0]
    assert spec.keep is True
    assert spec.env[contract.ENV_KEEP_ALIVE] == "1"
    assert read(run_dir() / "summary.json")["config"]["keep"] is True
    assert "ssebench runs stop run-1" in outcome.stderr


def test_a_failed_reference_copy_leaves_nothing_behind(
    home: Path, use_backend: UseBackend, cli: Cli
) -> None:
    backend = fake_backend(fail_copy=True)
    use_backend(backend)

    outcome = cli(*run_args())

    assert outcome.exit_code == 1
    assert outcome.stderr == (
        "ssebench: cannot copy the reference patch /ssebench/diffs/patch.diff out of image "
        "fake/tool/demo-task:1: no file /ssebench/diffs/patch.diff in "
        "fake/tool/demo-task:1\n"
    )
    assert not Path("results").exists()
    assert "start" not in backend.methods
    assert not backend.calls_to("copy_from_image")[0][2].parent.exists()
