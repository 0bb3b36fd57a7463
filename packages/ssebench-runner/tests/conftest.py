"""A home with a tiny dataset and probe agents in tmp_path, and the fake backend wired in."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from ssebench.conformance.fake import FakeBackend
from ssebench.runner import _commands_eval, _commands_run, _commands_verify
from ssebench.runner._plan import RunOptions, RunPlan, plan_run
from ssebench.runner.cli import app
from ssebench.spec import Backend, contract

from .fakes import fake_backend

TASK_ID = "demo-task"

TASK_CONFIG = f"""\
id: {TASK_ID}
project: demo
repository: https://example.invalid/demo.git
language: c
source: /src/demo
task_description:
  issue: the decoder reads past its input
scripts:
  build: scripts/build.sh
  run: scripts/run.sh
  test: scripts/test.sh
files:
  patch: diffs/patch.diff
  poc:
    - pocs/one.bin
  future_test: diffs/test.diff
"""

START = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


TASK_FILES = (
    "build.sh",
    "run.sh",
    "test.sh",
    "diffs/patch.diff",
    "diffs/test.diff",
    "pocs/one.bin",
)
"""What TASK_CONFIG names, by the task folder's own paths (under sse/)."""


def write_task(dataset: Path, task_id: str, config: str | None = None) -> Path:
    """A task folder: its config (TASK_CONFIG with its `id` by default), the files
    TASK_CONFIG names and a Dockerfile FROM the base."""
    folder = dataset / task_id
    (folder / "sse").mkdir(parents=True)
    if config is None:
        config = TASK_CONFIG.replace(f"id: {TASK_ID}\n", f"id: {task_id}\n", 1)
    (folder / "sse" / "config.yaml").write_text(config)
    for name in TASK_FILES:
        (folder / "sse" / name).parent.mkdir(exist_ok=True)
        (folder / "sse" / name).write_text(f"{name}\n")
    (folder / "Dockerfile").write_text("ARG SSEBENCH_BASE_IMAGE\nFROM ${SSEBENCH_BASE_IMAGE}\n")
    return folder


def write_agent(parent: Path, name: str, *, uses_model: bool = False) -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(
        f"name: {name}\nversion: '1.0'\nuses_model: {str(uses_model).lower()}\n"
    )
    return folder


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An SSEBench home with one task and agents `reference`, `dummy` and `chatty` (uses a model).

    The current directory is a fresh folder, so `results/` lands there.
    """
    home = tmp_path / "home"
    (home / "agents").mkdir(parents=True)
    (home / "pyproject.toml").write_text("[tool.ssebench]\nhome = true\n")
    dataset = home / "datasets" / "demo"
    write_task(dataset, TASK_ID)
    (dataset / "dataset.yaml").write_text('version: "1"\nname: demo\n')
    agents = tmp_path / "agents"
    write_agent(agents, "reference")
    write_agent(agents, "dummy")
    write_agent(agents, "chatty", uses_model=True)
    monkeypatch.setenv("SSEBENCH_HOME", str(home))
    monkeypatch.setenv("SSEBENCH_AGENT_PATH", str(agents))
    for name in ("SSEBENCH_BACKEND", "SSEBENCH_EGRESS"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


@pytest.fixture
def fake(home: Path, use_backend: Callable[[Backend[Any]], None]) -> FakeBackend:
    """A well-behaved fake backend, selected by `--backend fake`."""
    backend = fake_backend()
    use_backend(backend)
    return backend


@pytest.fixture
def use_backend(monkeypatch: pytest.MonkeyPatch) -> Callable[[Backend[Any]], None]:
    """Make `--backend fake` select the given backend; other names go the real way."""

    def use(backend: Backend[Any]) -> None:
        real = _commands_run.get_backend

        def get_backend(name: str) -> Backend[Any]:
            return backend if name == "fake" else real(name)

        monkeypatch.setattr(_commands_run, "get_backend", get_backend)
        monkeypatch.setattr(_commands_eval, "get_backend", get_backend)
        monkeypatch.setattr(_commands_verify, "get_backend", get_backend)

    return use


@pytest.fixture
def cli() -> Callable[..., Result]:
    """Invoke `ssebench` with arguments; stdout and stderr are kept apart."""

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(app, list(args))

    return invoke


def run_args(*extra: str, agent: str = "dummy", run_id: str = "run-1") -> list[str]:
    """`ssebench run` arguments for the fake backend."""
    return [
        "run",
        "--task",
        TASK_ID,
        "--agent",
        agent,
        "--backend",
        "fake",
        "--run-id",
        run_id,
        *extra,
    ]


@pytest.fixture
def make_plan(home: Path) -> Callable[..., RunPlan]:
    """A checked plan for the home's task, as `ssebench run` would make it."""

    def make(*, agent: str = "dummy", run_id: str = "run-1", keep: bool = False) -> RunPlan:
        options = RunOptions(task=TASK_ID, agent=agent, backend="fake", run_id=run_id, keep=keep)
        return plan_run(options, results_root=Path(contract.HOST_RESULTS_ROOT), now=START)

    return make


def run_dir(agent: str = "dummy", run_id: str = "run-1") -> Path:
    """Where a run of the home's task goes, relative to the current directory."""
    return Path(contract.HOST_RESULTS_ROOT) / TASK_ID / "none" / agent / run_id
