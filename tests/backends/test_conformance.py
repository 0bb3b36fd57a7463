"""The backend conformance suite: behaviour every backend must show, against its real engine.

Each test drives the backend only through the `Backend` interface with a probe
image (probe/probe.sh), so a third-party backend can run the same suite.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ssebench.spec import Backend, BackendError, RunHandle, RunSpec, contract, labels

StartRun = Callable[..., tuple[RunSpec, RunHandle]]

pytestmark = pytest.mark.docker


def test_a_run_streams_its_output_to_stdout_and_stderr(
    backend: Backend[Any], start_run: StartRun, capfd: pytest.CaptureFixture[str]
) -> None:
    _, handle = start_run("talk")
    assert backend.wait(handle, timeout=60) == 0
    out, err = capfd.readouterr()
    assert "probe: line one\n" in out
    assert "probe: line two\n" in out
    assert "probe: to stderr\n" in err
    assert "probe: to stderr" not in out


def test_wait_returns_the_exit_status_of_the_run(
    backend: Backend[Any], start_run: StartRun
) -> None:
    _, handle = start_run("talk", extra_env={"PROBE_EXIT": "3"})
    assert backend.wait(handle, timeout=60) == 3


def test_wait_raises_timeout_error_when_the_run_outlasts_it(
    backend: Backend[Any], start_run: StartRun
) -> None:
    _, handle = start_run("sleep")
    with pytest.raises(TimeoutError):
        backend.wait(handle, timeout=1)


def test_a_stopped_run_ends_with_128_plus_sigterm(
    backend: Backend[Any], start_run: StartRun
) -> None:
    _, handle = start_run("sleep")
    time.sleep(1)
    backend.stop(handle, grace=10)
    assert backend.wait(handle, timeout=30) == 143


def test_stop_is_safe_after_exit_and_more_than_once(
    backend: Backend[Any], start_run: StartRun
) -> None:
    _, handle = start_run("talk")
    assert backend.wait(handle, timeout=60) == 0
    backend.stop(handle, grace=1)
    backend.stop(handle, grace=1)


def test_results_are_in_the_run_directory_after_collect_results(
    backend: Backend[Any], start_run: StartRun
) -> None:
    spec, handle = start_run("talk")
    backend.wait(handle, timeout=60)
    dest = Path(spec.results.source)
    backend.collect_results(handle, dest)
    assert json.loads((dest / "result.json").read_text()) == {"probe": True}
    assert (dest / "archive" / "dialog.jsonl").read_text() == "from the agent\n"


def test_logs_yield_the_output_one_line_at_a_time(
    backend: Backend[Any], start_run: StartRun
) -> None:
    _, handle = start_run("talk")
    backend.wait(handle, timeout=60)
    lines = list(backend.logs(handle))
    assert "probe: line one" in lines
    assert "probe: to stderr" in lines
    assert all("\n" not in line for line in lines)


def test_logs_follow_until_the_run_exits(backend: Backend[Any], start_run: StartRun) -> None:
    _, handle = start_run("talk")
    lines = list(backend.logs(handle, follow=True))
    # Order holds within a stream only: stdout and stderr are merged as they arrive.
    assert [line for line in lines if "line" in line] == ["probe: line one", "probe: line two"]
    assert "probe: to stderr" in lines


def test_runs_are_found_by_their_labels(backend: Backend[Any], start_run: StartRun) -> None:
    spec, _ = start_run("sleep")
    runs = backend.list_runs({labels.RUN_ID: spec.run_id, labels.WEBUI: "true"})
    assert [run.run_id for run in runs] == [spec.run_id]
    run = runs[0]
    assert run.state == "running"
    assert run.labels[labels.RESULTS] == spec.results.source
    assert run.created_at is not None
    assert backend.list_runs({labels.RUN_ID: spec.run_id, labels.AGENT: "someone-else"}) == []
    inspected = backend.inspect_run(spec.run_id)
    assert inspected is not None
    assert inspected.handle.run_id == spec.run_id
    backend.stop(inspected.handle, grace=5)
    assert backend.wait(inspected.handle, timeout=30) == 143
    after = backend.inspect_run(spec.run_id)
    assert after is not None
    assert (after.state, after.exit_code) == ("exited", 143)


def test_inspecting_an_unknown_run_gives_none(backend: Backend[Any]) -> None:
    assert backend.inspect_run("no-such-run-anywhere") is None


def test_cleanup_leaves_nothing_of_the_run(backend: Backend[Any], start_run: StartRun) -> None:
    spec, handle = start_run("talk")
    backend.wait(handle, timeout=60)
    backend.cleanup(handle)
    assert backend.list_runs({labels.RUN_ID: spec.run_id}) == []
    backend.cleanup(handle)


def test_a_kept_run_is_waited_for_until_its_grade_and_survives_cleanup(
    backend: Backend[Any], start_run: StartRun
) -> None:
    spec, handle = start_run("keep", keep=True)
    assert backend.wait(handle, timeout=60) == 0
    assert (Path(spec.results.source) / contract.GRADED_MARKER).exists()
    backend.cleanup(handle)
    run = backend.inspect_run(spec.run_id)
    assert run is not None
    assert run.state == "running"


def test_a_run_whose_image_is_missing_leaves_nothing_behind(
    backend: Backend[Any], start_run: StartRun, planted_secret: str
) -> None:
    from ssebench.spec import RunSpec

    spec, handle = start_run("talk")
    backend.wait(handle, timeout=60)
    broken = RunSpec(
        **{**_fields(spec), "image": "ssebench-test/not-there:never", "run_id": "conf-broken"}
    )
    with pytest.raises(BackendError) as caught:
        backend.start(broken)
    assert planted_secret not in str(caught.value)
    assert backend.list_runs({labels.RUN_ID: "conf-broken"}) == []


def test_copy_from_image_copies_one_file(
    backend: Backend[Any], probe_image: str, tmp_path: Path
) -> None:
    dest = tmp_path / "deep" / "artifact.txt"
    backend.copy_from_image(probe_image, "/probe/artifact.txt", dest)
    assert dest.read_text() == "copied out of the image\n"


def test_copy_from_image_raises_runtime_error_for_a_missing_file(
    backend: Backend[Any], probe_image: str, tmp_path: Path
) -> None:
    with pytest.raises(RuntimeError):
        backend.copy_from_image(probe_image, "/probe/nothing-here", tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_the_endpoint_reaches_a_port_of_the_running_run(
    backend: Backend[Any], start_run: StartRun
) -> None:
    if type(backend).endpoint is Backend.endpoint:
        pytest.skip(f"the {backend.name} backend does not offer endpoints")
    _, handle = start_run("serve")
    url = backend.endpoint(handle, contract.DAEMON_PORT)
    body = _get_with_retries(url + "/index.html")
    assert body == "probe says hello\n"


def test_the_endpoint_of_a_finished_run_is_an_error(
    backend: Backend[Any], start_run: StartRun
) -> None:
    if type(backend).endpoint is Backend.endpoint:
        pytest.skip(f"the {backend.name} backend does not offer endpoints")
    _, handle = start_run("talk")
    backend.wait(handle, timeout=60)
    with pytest.raises(BackendError, match="not running"):
        backend.endpoint(handle, contract.DAEMON_PORT)


def test_exec_argv_runs_a_command_and_passes_variables_by_name_only(
    backend: Backend[Any], start_run: StartRun, planted_secret: str
) -> None:
    if not backend.supports_exec:
        pytest.skip(f"the {backend.name} backend does not support exec")
    _, handle = start_run("sleep")
    argv = backend.exec_argv(
        handle,
        ["sh", "-c", 'echo "$PASSED" in "$(pwd)" as "$(id -un)"'],
        user="nobody",
        workdir="/tmp",
        env_names=["PASSED"],
    )
    value = "value-" + planted_secret
    assert all(value not in arg for arg in argv)
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={"PASSED": value, "PATH": "/usr/bin:/bin:/usr/local/bin"},
        check=True,
        timeout=30,
    )
    assert result.stdout == f"{value} in /tmp as nobody\n"


def test_a_planted_secret_never_surfaces_outside_the_container(
    backend: Backend[Any], start_run: StartRun, planted_secret: str
) -> None:
    spec, handle = start_run("sleep")
    seen = [repr(handle), repr(spec), *map(repr, backend.list_runs({labels.RUN_ID: spec.run_id}))]
    if backend.supports_exec:
        seen.append(" ".join(backend.exec_argv(handle, ["true"], env_names=[contract.ENV_API_KEY])))
    processes = subprocess.run(
        ["ps", "-eo", "args"], capture_output=True, text=True, check=True
    ).stdout
    seen.append(processes)
    for text in seen:
        assert planted_secret not in text


def _fields(spec: Any) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in spec.__struct_fields__}


def _get_with_retries(url: str, attempts: int = 50) -> str:
    for _ in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # local container address
                return str(response.read().decode())
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never answered")
