"""The checks of the `Backend` interface: behaviour every backend must show.

Each drives the backend only through the interface, with the probe image
(probe/probe.sh), so a third party's backend runs the same checks. A check is
a function of the harness named by the behaviour it proves; it fails with an
AssertionError (or whatever the backend raised).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import msgspec

from ssebench.conformance._harness import WHICH_CONTAINER, Harness
from ssebench.spec import BackendError, contract, labels

# -- without a run -------------------------------------------------------------------------------


def the_flags_agree_with_the_methods(h: Harness) -> None:
    """`supports_exec` says what the class does: it overrides `exec_argv` exactly when set."""
    assert h.backend.supports_exec == ("exec" in h.capabilities), (
        f"supports_exec is {h.backend.supports_exec} but exec_argv is "
        f"{'overridden' if 'exec' in h.capabilities else 'the default'}"
    )
    assert isinstance(h.backend.name, str) and h.backend.name


def inspecting_an_unknown_run_gives_none(h: Harness) -> None:
    assert h.backend.inspect_run("no-such-run-anywhere") is None


def listing_runs_by_labels_nobody_has_gives_nothing(h: Harness) -> None:
    assert h.backend.list_runs({labels.RUN_ID: "no-such-run-anywhere"}) == []


# -- runs ----------------------------------------------------------------------------------------


def a_run_streams_its_output_to_stdout_and_stderr(h: Harness) -> None:
    with h.capture() as captured:
        _, handle = h.start("talk")
        assert h.backend.wait(handle, timeout=60) == 0
    assert "probe: line one\n" in captured.out
    assert "probe: line two\n" in captured.out
    assert "probe: to stderr\n" in captured.err
    assert "probe: to stderr" not in captured.out


def wait_returns_the_exit_status_of_the_run(h: Harness) -> None:
    _, handle = h.start("talk", env={"PROBE_EXIT": "3"})
    assert h.backend.wait(handle, timeout=60) == 3


def wait_raises_timeout_error_when_the_run_outlasts_it(h: Harness) -> None:
    _, handle = h.start("sleep")
    try:
        h.backend.wait(handle, timeout=1)
    except TimeoutError:
        return
    raise AssertionError("wait returned although the run was still going")


def a_stopped_run_ends_with_128_plus_sigterm(h: Harness) -> None:
    _, handle = h.start("sleep")
    time.sleep(1)
    h.backend.stop(handle, grace=10)
    assert h.backend.wait(handle, timeout=30) == 143


def stop_is_safe_after_exit_and_more_than_once(h: Harness) -> None:
    _, handle = h.start("talk")
    assert h.backend.wait(handle, timeout=60) == 0
    h.backend.stop(handle, grace=1)
    h.backend.stop(handle, grace=1)


def results_are_in_the_run_directory_after_collect_results(h: Harness) -> None:
    spec, handle = h.start("talk")
    h.backend.wait(handle, timeout=60)
    dest = Path(spec.results.source)
    h.backend.collect_results(handle, dest)
    assert json.loads((dest / contract.RESULT_FILE).read_text()) == {"probe": True}
    assert (dest / contract.RUN_ARCHIVE / contract.DIALOG_FILE).read_text() == "from the agent\n"


def logs_yield_the_output_one_line_at_a_time(h: Harness) -> None:
    _, handle = h.start("talk")
    h.backend.wait(handle, timeout=60)
    lines = list(h.backend.logs(handle))
    assert "probe: line one" in lines
    assert "probe: to stderr" in lines
    assert all("\n" not in line for line in lines)


def logs_follow_until_the_run_exits(h: Harness) -> None:
    _, handle = h.start("talk")
    lines = list(h.backend.logs(handle, follow=True))
    # Order holds within a stream only: stdout and stderr are merged as they arrive.
    assert [line for line in lines if "line" in line] == ["probe: line one", "probe: line two"]
    assert "probe: to stderr" in lines


def runs_are_found_by_their_labels(h: Harness) -> None:
    spec, _ = h.start("sleep")
    runs = h.backend.list_runs({labels.RUN_ID: spec.run_id, labels.WEBUI: "true"})
    assert [run.run_id for run in runs] == [spec.run_id]
    run = runs[0]
    assert run.state == "running"
    assert run.labels[labels.RESULTS] == spec.results.source
    assert run.created_at is not None
    assert h.backend.list_runs({labels.RUN_ID: spec.run_id, labels.AGENT: "someone-else"}) == []
    inspected = h.backend.inspect_run(spec.run_id)
    assert inspected is not None
    assert inspected.handle.run_id == spec.run_id
    h.backend.stop(inspected.handle, grace=5)
    assert h.backend.wait(inspected.handle, timeout=30) == 143
    after = h.backend.inspect_run(spec.run_id)
    assert after is not None
    assert (after.state, after.exit_code) == ("exited", 143)


def cleanup_leaves_nothing_of_the_run(h: Harness) -> None:
    spec, handle = h.start("talk")
    h.backend.wait(handle, timeout=60)
    h.backend.cleanup(handle)
    assert h.backend.list_runs({labels.RUN_ID: spec.run_id}) == []
    h.backend.cleanup(handle)


def a_kept_run_is_waited_for_until_its_grade_and_survives_cleanup(h: Harness) -> None:
    spec, handle = h.start("keep", keep=True)
    assert h.backend.wait(handle, timeout=60) == 0
    dest = Path(spec.results.source)
    h.backend.collect_results(handle, dest)
    assert (dest / contract.GRADED_MARKER).exists()
    h.backend.cleanup(handle)
    run = h.backend.inspect_run(spec.run_id)
    assert run is not None
    assert run.state == "running"


def remove_takes_away_a_kept_running_run(h: Harness) -> None:
    spec, handle = h.start("keep", keep=True)
    assert h.backend.wait(handle, timeout=60) == 0
    h.backend.remove(handle)
    assert h.backend.list_runs({labels.RUN_ID: spec.run_id}) == []


def a_run_whose_image_is_missing_leaves_nothing_behind(h: Harness) -> None:
    broken = h.spec("talk", image="ssebench-test/not-there:never", run_id="conf-broken")
    try:
        handle = h.backend.start(broken)
    except BackendError as exc:
        assert h.secret not in str(exc)
    else:
        h.backend.remove(handle)
        raise AssertionError("a run of an image that does not exist started")
    assert h.backend.list_runs({labels.RUN_ID: "conf-broken"}) == []


def copy_from_image_copies_one_file(h: Harness) -> None:
    dest = h.workdir / "deep" / "artifact.txt"
    h.backend.copy_from_image(h.probe_image, "/probe/artifact.txt", dest)
    assert dest.read_text() == "copied out of the image\n"


def copy_from_image_raises_a_backend_error_for_a_missing_file(h: Harness) -> None:
    dest = h.workdir / "x"
    try:
        h.backend.copy_from_image(h.probe_image, "/probe/nothing-here", dest)
    except BackendError:
        assert not dest.exists()
        return
    raise AssertionError("copying a file the image lacks did not fail")


def the_endpoint_reaches_a_port_of_the_running_run(h: Harness) -> None:
    _, handle = h.start("serve")
    url = h.backend.endpoint(handle, contract.DAEMON_PORT)
    assert _get_with_retries(url + "/index.html") == "probe says hello\n"


def the_endpoint_of_a_finished_run_is_an_error(h: Harness) -> None:
    _, handle = h.start("talk")
    h.backend.wait(handle, timeout=60)
    try:
        h.backend.endpoint(handle, contract.DAEMON_PORT)
    except BackendError as exc:
        assert "not running" in str(exc)
        return
    raise AssertionError("a finished run gave an endpoint")


def without_endpoints_asking_for_one_is_a_backend_error(h: Harness) -> None:
    _, handle = h.start("talk")
    try:
        h.backend.endpoint(handle, contract.DAEMON_PORT)
    except BackendError:
        return
    raise AssertionError("a backend without endpoints gave one")


def exec_argv_runs_a_command_and_passes_variables_by_name_only(h: Harness) -> None:
    _, handle = h.start("sleep")
    argv = h.backend.exec_argv(
        handle,
        ["sh", "-c", 'echo "$PASSED" in "$(pwd)" as "$(id -un)"'],
        user="nobody",
        workdir="/tmp",
        env_names=["PASSED"],
    )
    value = "value-" + h.secret
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


def exec_argv_reaches_the_task_container_by_default_and_the_agents_on_request(
    h: Harness,
) -> None:
    """`container="agent"` runs the command where the agent runs; the default, `task`, in
    the task container. A sandbox run's one container is both."""
    _, handle = h.start("sleep")
    found = {}
    for container in ("task", "agent"):
        argv = h.backend.exec_argv(
            handle, ["sh", "-c", f'echo "${WHICH_CONTAINER}"'], container=container
        )
        done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30)
        found[container] = done.stdout.strip()
    default = subprocess.run(
        h.backend.exec_argv(handle, ["sh", "-c", f'echo "${WHICH_CONTAINER}"']),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    one = h.suite.mode == "sandbox"
    assert found == {"task": "agent" if one else "task", "agent": "agent"}, found
    assert default == found["task"]


def the_endpoint_of_either_container_reaches_the_run(h: Harness) -> None:
    """`endpoint(..., container=...)` answers for both containers of a run (a sidecar
    pair's share one network namespace; a sandbox run's one container is both)."""
    _, handle = h.start("serve")
    for container in ("task", "agent"):
        url = h.backend.endpoint(handle, contract.DAEMON_PORT, container=container)
        assert _get_with_retries(url + "/index.html") == "probe says hello\n"


def without_exec_asking_for_a_command_is_a_backend_error(h: Harness) -> None:
    _, handle = h.start("talk")
    try:
        h.backend.exec_argv(handle, ["true"])
    except BackendError:
        return
    raise AssertionError("a backend without exec gave a command")


def a_planted_secret_never_surfaces_outside_the_container(h: Harness) -> None:
    spec, handle = h.start("sleep")
    seen = [
        repr(handle),
        repr(spec),
        msgspec.json.encode(spec.record()).decode(),
        *map(repr, h.backend.list_runs({labels.RUN_ID: spec.run_id})),
    ]
    if "exec" in h.capabilities:
        argv = h.backend.exec_argv(handle, ["true"], env_names=[contract.ENV_API_KEY])
        seen.append(" ".join(argv))
    processes = subprocess.run(
        ["ps", "-eo", "args"], capture_output=True, text=True, check=True
    ).stdout
    seen.append(processes)
    for text in seen:
        assert h.secret not in text


def _get_with_retries(url: str, attempts: int = 50) -> str:
    for _ in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (a run's address)
                return str(response.read().decode())
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never answered")
