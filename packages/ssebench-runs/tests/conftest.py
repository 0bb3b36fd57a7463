"""Fixtures of the `ssebench runs` tests: the CLI, a fake backend, probe runs on a real engine."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest
from typer.testing import CliRunner

from ssebench.conformance.fake import FakeBackend
from ssebench.runs import _select
from ssebench.runs.cli import app
from ssebench.spec import Backend, Mount, RunHandle, RunSpec, contract, labels

"""The conformance suite's probe image (probe.sh tells its modes)."""

OWNER_LABEL = "ssebench-test.owner"
"""Put on every probe run of a test, so what a test leaves can be found and removed."""

RUNS_EXE = Path(sys.executable).parent / "ssebench-runs"
"""The installed `ssebench-runs` script, for what must run as a process of its own."""


@dataclass(frozen=True)
class Outcome:
    """What a command did: its exit status and what it printed."""

    code: int
    out: str
    err: str


Invoke = Callable[..., Outcome]


@pytest.fixture
def invoke() -> Invoke:
    """Run `ssebench-runs ARGS...` in this process."""

    def run(*args: str, env: dict[str, str] | None = None) -> Outcome:
        result = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
        return Outcome(result.exit_code, result.stdout, result.stderr)

    return run


@pytest.fixture
def use_backend(monkeypatch: pytest.MonkeyPatch) -> Callable[[FakeBackend], FakeBackend]:
    """Make every command use the given fake, whatever --backend says."""

    def use(backend: FakeBackend) -> FakeBackend:
        monkeypatch.setattr(_select, "get_backend", lambda name: backend)
        return backend

    return use


# --- probe runs on the real engine -------------------------------------------------------------


@pytest.fixture
def docker_backend(docker_client: docker.DockerClient) -> Backend[Any]:
    """The Docker backend, found the way `ssebench runs` finds it."""
    from ssebench.spec import get_backend

    return get_backend("docker")


StartRun = Callable[..., tuple[RunSpec, RunHandle]]


@pytest.fixture
def start_run(
    docker_backend: Backend[Any],
    docker_client: docker.DockerClient,
    probe_image: str,
    tmp_path: Path,
) -> Iterator[StartRun]:
    """Start probe runs with the runner's labels; everything of them is removed afterwards.

    Call it with the probe's mode and, optionally, `keep`, `run_id`, `agent` and `env`.
    """
    owner = secrets.token_hex(6)
    started: list[RunHandle] = []

    def start(
        mode: str = "talk",
        *,
        keep: bool = False,
        run_id: str | None = None,
        agent: str = "probe",
        env: dict[str, str] | None = None,
    ) -> tuple[RunSpec, RunHandle]:
        run_id = run_id or f"runs-{secrets.token_hex(4)}"
        run_dir = tmp_path / agent / run_id
        (run_dir / "archive").mkdir(parents=True)
        spec = RunSpec(
            run_id=run_id,
            task_name="probe-task",
            mode="sandbox",
            image=probe_image,
            env={
                contract.ENV_API_KEY: "sk-runs-" + secrets.token_hex(12),
                "PROBE_MODE": mode,
                contract.ENV_RESULTS: contract.RESULTS_DIR,
                contract.ENV_ARCHIVE: contract.ARCHIVE_DIR,
                **(env or {}),
            },
            results=Mount(target=contract.RESULTS_DIR, source=str(run_dir)),
            archive=Mount(target=contract.ARCHIVE_DIR, source=str(run_dir / "archive")),
            labels={
                labels.RUN_ID: run_id,
                labels.WEBUI: "true",
                labels.TASK_ID: "probe-task",
                labels.MODEL: "none",
                labels.AGENT: agent,
                labels.RESULTS: str(run_dir),
                labels.REFERENCE_RUN: "false",
                OWNER_LABEL: owner,
            },
            timeout=60,
            keep=keep,
        )
        handle = docker_backend.start(spec)
        started.append(handle)
        return spec, handle

    yield start
    for handle in started:
        docker_backend.remove(handle)
    left = docker_client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner}"})
    for container in left:
        container.remove(force=True)
    assert left == [], "a test left containers behind"


def ssebench_objects(client: docker.DockerClient, run_id: str) -> list[str]:
    """The containers and networks on the engine that carry the run's ID."""
    wanted: dict[str, str | list[str] | bool] = {"label": f"{labels.RUN_ID}={run_id}"}
    containers = client.containers.list(all=True, filters=wanted)
    networks = client.networks.list(filters=wanted)
    return [f"container {c.name}" for c in containers] + [f"network {n.name}" for n in networks]


def process_list() -> str:
    """Every command line on this machine, as `ps` shows them."""
    return subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
