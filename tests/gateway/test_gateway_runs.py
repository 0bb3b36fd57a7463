"""`ssebench run --model` end to end: a real run whose agent calls the scripted model."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import secrets
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from ssebench.backends.docker import DockerGateway

from .conftest import HOME, INPUT_PRICE, MODEL, OUTPUT_PRICE, Upstream, run_cli, ssebench

pytestmark = pytest.mark.docker

TASK = "pyarchive-path-traversal"


@pytest.mark.parametrize("mode", ["sandbox", "sidecar"])
def test_a_run_whose_budget_runs_out_is_graded_and_recorded_as_budget_exceeded(
    mode: str,
    gateway: DockerGateway,
    upstream: Upstream,
    tmp_path: Path,
    docker_client: docker.DockerClient,
) -> None:
    run_id = "gwrun-" + secrets.token_hex(3)
    before = len(upstream.model.served.calls)
    done = run_cli(
        tmp_path,
        *("run", "--task", TASK, "--agent", "model-caller", "--run-id", run_id),
        *("--model", MODEL, "--budget", "0.05", "--timeout", "300", "--json"),
        *("--mode", mode),
    )
    run_dir = tmp_path / "results" / TASK / MODEL / "model-caller" / run_id
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)

    # Graded as usual (the agent changed nothing: the PoC still triggers), then the outcome.
    assert summary["patch_result"]["status"] == "failed"
    assert summary["outcome"] == "budget_exceeded"
    calls = upstream.model.served.calls[before:]
    # Admitted after spending 0 and 0.02 of 0.05; then what is left (0.01) pays for less
    # than the third call's prompt.
    assert len(calls) == 2
    priced = sum(
        c["usage"]["prompt_tokens"] * INPUT_PRICE + c["usage"]["completion_tokens"] * OUTPUT_PRICE
        for c in calls
    )
    assert summary["spend"] == pytest.approx(priced)
    assert summary["usage"] == {
        "calls": 2,
        "prompt_tokens": sum(c["usage"]["prompt_tokens"] for c in calls),
        "completion_tokens": sum(c["usage"]["completion_tokens"] for c in calls),
        "refused_for_budget": 1,
        "refused_for_concurrency": 0,
        "provider_errors": [],
        "provider_down": False,
    }
    assert summary["config"]["model"] == MODEL and summary["config"]["budget"] == 0.05
    assert summary["config"]["mode"] == mode
    agent_log = (run_dir / "agent.log").read_text()
    assert "call 3: 401" in agent_log
    assert "the run's budget of $0.05 is used up" in agent_log
    # The run's key was revoked when the run ended.
    used = gateway.store.usage(run_id)
    assert used is not None and used.spend == pytest.approx(priced)
    assert used.revoked
    # The provider key is in no file of the run directory (archives opened).
    secret = upstream.provider_key.encode()
    files = [path for path in run_dir.rglob("*") if path.is_file() and not path.is_symlink()]
    assert files
    for path in files:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        assert secret not in data, path
    # Nor the run's own key: run.json has the environment's names only.
    record = json.loads((run_dir / "run.json").read_text())
    assert "SSE_API_KEY" in record["env_names"]
    assert b"sk-ssebench-" not in (run_dir / "run.json").read_bytes()


def test_proxy_status_shows_the_running_gateway_and_its_models(gateway: DockerGateway) -> None:
    done = subprocess.run(
        [ssebench(), "proxy", "status", "--json"],
        env={**os.environ, "SSEBENCH_HOME": str(HOME)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["name"] == gateway.name and status["state"] == "running"
    assert MODEL in status["models"]
    assert status["address"] == f"{gateway.host_address()}:4000"
    assert "sk-" not in done.stdout + done.stderr


@contextlib.contextmanager
def gateway_creations(client: docker.DockerClient, name: str) -> Iterator[list[str]]:
    """The IDs of the containers named `name` created while entered (read live: the
    engine's memory of past events is short when other work shares it); the gateway
    of that name is down on entry and removed, with its network, on exit."""
    gateway = DockerGateway(client, name)
    gateway.down()
    created: list[str] = []
    events = client.events(
        decode=True, filters={"type": "container", "event": ["create"], "container": [name]}
    )

    def read() -> None:
        with contextlib.suppress(Exception):  # the stream is closed under the reader
            created.extend(str(event.get("id")) for event in events)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield created
        time.sleep(2)  # the last events reach the stream
    finally:
        events.close()
        reader.join(10)
        gateway.down()
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_network(gateway.egress_network)


def test_an_evaluation_of_four_runs_at_once_starts_the_gateway_once(
    gateway: DockerGateway,
    upstream: Upstream,
    tmp_path: Path,
    docker_client: docker.DockerClient,
) -> None:
    # A gateway of this test's own, down when the evaluation starts: each of its four
    # runs asks for it at once.
    name = f"{gateway.name}-eval"
    with gateway_creations(docker_client, name) as created:
        done = run_cli(
            tmp_path,
            *("eval", "--tasks", TASK, "--agents", "model-caller", "--models", MODEL),
            *("--repeat", "4", "-j", "4", "--timeout", "300", "--json"),
            env={"SSEBENCH_GATEWAY": name},
            timeout=1800,
        )

    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads(done.stdout)["runs"]
    assert len(runs) == 4
    assert len(created) == 1, created
    for row in runs:
        summary = json.loads((Path(row["run_dir"]) / "summary.json").read_text())
        assert summary["outcome"] == "failed", summary  # graded: it changed nothing
        assert summary["usage"]["calls"] == 10


def test_four_commands_at_once_start_a_gateway_that_was_down_once(
    gateway: DockerGateway, upstream: Upstream, docker_client: docker.DockerClient
) -> None:
    # Four processes (four `ssebench run`s, or evaluations, started side by side).
    name = f"{gateway.name}-racing"
    env = {**os.environ, "SSEBENCH_HOME": str(HOME), "SSEBENCH_GATEWAY": name}
    with gateway_creations(docker_client, name) as created:
        starts = [
            subprocess.Popen(
                [ssebench(), "proxy", "up", "--json"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        answers = [start.communicate(timeout=600) for start in starts]
        statuses = [json.loads(out)["state"] for out, _ in answers if out]

    assert [start.returncode for start in starts] == [0] * 4, [err for _, err in answers]
    assert statuses == ["running"] * 4
    assert len(created) == 1, created
