"""`ssebench runs` against runs on a real Docker engine, made with the DockerBackend."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from typing import Any

import docker
import docker.api.client
import pytest

from ssebench.spec import Backend, contract, labels

from .conftest import RUNS_EXE, Invoke, StartRun, process_list, ssebench_objects

pytestmark = pytest.mark.docker


def _get(url: str, attempts: int = 50) -> str:
    for _ in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # a container's own address
                return str(response.read().decode())
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never answered")


def _listed(invoke: Invoke, *run_ids: str) -> list[dict[str, Any]]:
    outcome = invoke("list", "--json")
    assert outcome.code == 0, outcome.err
    listed = json.loads(outcome.out)
    assert (listed["backend"], listed["supports_exec"]) == ("docker", True)
    return [run for run in listed["runs"] if run["run_id"] in run_ids]


def test_list_shows_kept_and_running_runs_newest_first(
    invoke: Invoke, start_run: StartRun, docker_backend: Backend[Any]
) -> None:
    kept_spec, kept = start_run("keep", keep=True)
    assert docker_backend.wait(kept, timeout=60) == 0
    time.sleep(1.1)  # the engine dates containers to the second
    running_spec, _ = start_run("sleep")
    runs = _listed(invoke, kept_spec.run_id, running_spec.run_id)
    assert [(run["run_id"], run["state"]) for run in runs] == [
        (running_spec.run_id, "running"),
        (kept_spec.run_id, "running"),
    ]
    kept_entry = runs[1]
    assert kept_entry["task"] == "probe-task"
    assert (kept_entry["model"], kept_entry["agent"]) == ("none", "probe")
    assert kept_entry["reference_run"] is False
    assert kept_entry["results_dir"] == kept_spec.results.source
    assert kept_entry["image"] == kept_spec.image
    assert kept_entry["created_at"].endswith("Z")
    assert all(key.startswith("ssebench.") for key in kept_entry["labels"])
    assert kept_entry["labels"][labels.WEBUI] == "true"
    table = invoke("list", env={"COLUMNS": "200"})
    assert kept_spec.run_id in table.out
    assert running_spec.run_id in table.out
    for entry in runs:
        inspected = invoke("inspect", entry["run_id"], "--json")
        assert (inspected.code, json.loads(inspected.out)) == (0, entry)


def test_list_asks_the_engine_once_however_many_runs_there_are(
    invoke: Invoke, start_run: StartRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = [start_run("sleep")[0].run_id for _ in range(3)]
    asked: list[str] = []
    request = docker.api.client.APIClient.request

    def counted(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(f"{method} {url.split('/', 3)[-1]}")
        return request(self, method, url, *args, **kwargs)

    monkeypatch.setattr(docker.api.client.APIClient, "request", counted)
    assert len(_listed(invoke, *started)) == 3
    about_containers = [line for line in asked if "/containers/" in line]
    assert len(about_containers) == 1, asked
    assert about_containers[0].startswith("GET ")
    assert about_containers[0].split("?")[0].endswith("/containers/json")


def test_list_and_inspect_never_show_the_environment_of_a_run(
    invoke: Invoke, start_run: StartRun
) -> None:
    spec, _ = start_run("sleep")
    secret = spec.env[contract.ENV_API_KEY]
    for args in (["list", "--json"], ["list"], ["inspect", spec.run_id, "--json"]):
        outcome = invoke(*args, env={"COLUMNS": "200"})
        assert secret not in outcome.out + outcome.err
        assert "PROBE_MODE" not in outcome.out


def test_inspect_shows_a_finished_run_with_its_exit_code(
    invoke: Invoke, start_run: StartRun, docker_backend: Backend[Any]
) -> None:
    spec, handle = start_run("talk", env={"PROBE_EXIT": "5"})
    assert docker_backend.wait(handle, timeout=60) == 5
    outcome = invoke("inspect", spec.run_id, "--json")
    assert outcome.code == 0
    run = json.loads(outcome.out)
    assert (run["run_id"], run["state"], run["exit_code"]) == (spec.run_id, "exited", 5)
    table = invoke("inspect", spec.run_id, env={"COLUMNS": "200"})
    assert "exited (5)" in table.out
    assert spec.results.source in table.out


def test_a_run_id_nobody_has_exits_3_and_one_several_have_exits_4(
    invoke: Invoke, start_run: StartRun
) -> None:
    spec, _ = start_run("sleep", agent="first")
    start_run("sleep", run_id=spec.run_id, agent="second")
    outcome = invoke("inspect", "runs-nobody-has-this")
    assert outcome.code == 3
    for args in (
        ["inspect", spec.run_id],
        ["logs", spec.run_id],
        ["stop", spec.run_id],
        ["remove", spec.run_id],
        ["endpoint", spec.run_id, "4263"],
        ["exec", spec.run_id, "--", "true"],
    ):
        outcome = invoke(*args)
        assert outcome.code == 4, args
        assert f"2 runs have the ID {spec.run_id!r}" in outcome.err
    assert len(_listed(invoke, spec.run_id)) == 2


def test_logs_print_the_output_of_a_kept_a_running_and_a_finished_run(
    invoke: Invoke, start_run: StartRun, docker_backend: Backend[Any]
) -> None:
    kept_spec, kept = start_run("keep", keep=True)
    docker_backend.wait(kept, timeout=60)
    assert invoke("logs", kept_spec.run_id).out == "probe: graded, staying up\n"
    running_spec, _ = start_run("sleep")
    deadline = time.monotonic() + 30
    while (outcome := invoke("logs", running_spec.run_id)).out == "":
        assert time.monotonic() < deadline, "the running run printed nothing"
        time.sleep(0.1)
    assert outcome.out.startswith("probe: sleeping\n")
    spec, _ = start_run("talk")
    outcome = invoke("logs", spec.run_id, "--follow")
    assert outcome.code == 0
    # The engine interleaves stdout and stderr as it received them: compare without order.
    assert sorted(outcome.out.splitlines()) == [
        "probe: line one",
        "probe: line two",
        "probe: to stderr",
    ]


def test_logs_into_a_closed_pipe_end_quietly(
    start_run: StartRun, docker_backend: Backend[Any]
) -> None:
    spec, handle = start_run("talk")
    docker_backend.wait(handle, timeout=60)
    reader, writer = os.pipe()
    os.close(reader)  # closed before the command writes a line
    try:
        done = subprocess.run(
            [str(RUNS_EXE), "logs", spec.run_id],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (0, "")
    shell = subprocess.run(
        ["sh", "-c", f"'{RUNS_EXE}' logs --follow {spec.run_id} | head -1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shell.stderr == ""
    assert shell.stdout in {"probe: line one\n", "probe: to stderr\n"}


@pytest.mark.parametrize("kept", [False, True], ids=["running", "kept"])
def test_stop_stops_a_run_and_leaves_it_in_place(
    invoke: Invoke, start_run: StartRun, docker_backend: Backend[Any], kept: bool
) -> None:
    spec, handle = start_run("keep" if kept else "sleep", keep=kept)
    if kept:
        assert docker_backend.wait(handle, timeout=60) == 0
    else:
        time.sleep(0.5)
    outcome = invoke("stop", spec.run_id, "--grace", "5")
    assert outcome.code == 0
    assert outcome.err == f"ssebench runs: stopped run {spec.run_id}\n"
    run = json.loads(invoke("inspect", spec.run_id, "--json").out)
    assert (run["state"], run["exit_code"]) == ("exited", 143)
    assert invoke("logs", spec.run_id).out.endswith("probe: stopped\n")


@pytest.mark.parametrize("state", ["kept running", "kept exited", "running"])
def test_remove_leaves_nothing_of_a_run(
    invoke: Invoke,
    start_run: StartRun,
    docker_backend: Backend[Any],
    docker_client: docker.DockerClient,
    state: str,
) -> None:
    kept = state.startswith("kept")
    spec, handle = start_run("keep" if kept else "sleep", keep=kept)
    if kept:
        docker_backend.wait(handle, timeout=60)
    if state.endswith("exited"):
        docker_backend.stop(handle, grace=0)
    assert ssebench_objects(docker_client, spec.run_id) != []
    outcome = invoke("remove", spec.run_id)
    assert outcome.code == 0, outcome.err
    assert ssebench_objects(docker_client, spec.run_id) == []
    assert invoke("inspect", spec.run_id).code == 3


def test_endpoint_answers_like_the_daemon_and_stays_valid(
    invoke: Invoke, start_run: StartRun
) -> None:
    spec, _ = start_run("serve")
    outcome = invoke("endpoint", spec.run_id, str(contract.DAEMON_PORT))
    assert outcome.code == 0, outcome.err
    url = outcome.out.strip()
    assert url.startswith("http://")
    assert url.endswith(f":{contract.DAEMON_PORT}")
    assert json.loads(_get(url + "/version")) == {"version": "probe"}
    answer = json.loads(invoke("endpoint", spec.run_id, "4263", "--json").out)
    assert answer == {"run_id": spec.run_id, "port": 4263, "url": url}


def test_endpoint_of_a_finished_run_is_an_error(
    invoke: Invoke, start_run: StartRun, docker_backend: Backend[Any]
) -> None:
    spec, handle = start_run("talk")
    docker_backend.wait(handle, timeout=60)
    outcome = invoke("endpoint", spec.run_id, "4263")
    assert (outcome.code, outcome.out) == (1, "")
    assert outcome.err == f"ssebench runs: run {spec.run_id} is not running (exited)\n"


def test_exec_passes_a_variable_that_never_appears_in_the_process_list(
    start_run: StartRun,
) -> None:
    spec, _ = start_run("sleep")
    value = "exec-secret-" + os.urandom(8).hex()
    process = subprocess.Popen(
        [
            str(RUNS_EXE),
            "exec",
            spec.run_id,
            "--env",
            "SECRETVAR",
            "--",
            "sh",
            "-c",
            "echo $SECRETVAR; sleep 2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SECRETVAR": value},
    )
    seen_exec = False
    while process.poll() is None:
        listing = process_list()
        assert value not in listing
        seen_exec = seen_exec or "--env SECRETVAR" in listing
        time.sleep(0.1)
    out, err = process.communicate(timeout=30)
    assert (process.returncode, out, err) == (0, value + "\n", "")
    assert seen_exec, "the docker exec never showed in the process list"


def test_exec_runs_as_the_user_and_in_the_folder_given(start_run: StartRun) -> None:
    spec, _ = start_run("sleep")
    done = subprocess.run(
        [
            str(RUNS_EXE),
            "exec",
            spec.run_id,
            "--user",
            "nobody",
            "--workdir",
            "/tmp",
            "--",
            "sh",
            "-c",
            'echo "$(id -un) in $(pwd)"; exit 7',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (7, "nobody in /tmp\n")


def test_exec_attaches_stdin_and_a_terminal_only_when_asked(start_run: StartRun) -> None:
    spec, _ = start_run("sleep")

    def run(*options: str, script: str) -> str:
        done = subprocess.run(
            [str(RUNS_EXE), "exec", spec.run_id, *options, "--", "sh", "-c", script],
            input="from the caller\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stderr) == (0, "")
        return done.stdout

    assert run("--stdin", script="cat") == "from the caller\n"
    assert run(script="cat") == ""
    terminal = "test -t 1 && echo terminal || echo none"
    assert run("--tty", script=terminal).strip() == "terminal"
    assert run(script=terminal) == "none\n"


def test_exec_in_a_finished_run_is_an_error(
    invoke: Invoke, start_run: StartRun, docker_backend: Backend[Any]
) -> None:
    spec, handle = start_run("talk")
    docker_backend.wait(handle, timeout=60)
    outcome = invoke("exec", spec.run_id, "--", "true")
    assert (outcome.code, outcome.err) == (
        1,
        f"ssebench runs: run {spec.run_id} is not running (exited)\n",
    )
