"""The example extension (tests/fixtures/ssebench-example-ext), installed with the dev group.

It is a package of its own, outside SSEBench's: found through its
`ssebench.backends` entry point, it passes the conformance suite against the
engine, and `ssebench run --backend logging` runs a task through it, every
interface call logged.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import docker
import pytest
from ssebench_example_ext import LOG_ENV, LoggingBackend

from ssebench.conformance import BackendFactory, conformance_tests
from ssebench.spec import BACKENDS_GROUP, get_backend

pytestmark = pytest.mark.docker

HOME = Path(__file__).resolve().parents[2]


@pytest.fixture
def conformance_backend_factory(
    docker_client: docker.DockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> BackendFactory:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    return lambda: get_backend("logging")


test_conformance = conformance_tests(backend=LoggingBackend)


def test_the_backend_comes_from_the_extensions_own_distribution() -> None:
    (entry,) = [e for e in metadata.entry_points(group=BACKENDS_GROUP) if e.name == "logging"]

    assert entry.value == "ssebench_example_ext:LoggingBackend"
    assert entry.dist is not None
    assert entry.dist.metadata["Name"] == "ssebench-example-ext"
    assert type(get_backend("logging")) is LoggingBackend


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_ssebench_run_with_the_logging_backend_logs_each_call(
    docker_client: docker.DockerClient, base_image: str, tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    run_id = f"logging-{secrets.token_hex(3)}"
    script = Path(sys.executable).with_name("ssebench")
    argv = [str(script if script.exists() else shutil.which("ssebench") or "ssebench")]
    env = {**os.environ, "SSEBENCH_HOME": str(HOME), LOG_ENV: str(log)}
    env.pop("SSEBENCH_PREBUILT", None)

    done = subprocess.run(
        [*argv, "run", "--backend", "logging", "--task", "tlvkit-heap-overflow",
         "--agent", "reference", "--run-id", run_id, "--difficulty", "1", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=2000, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["patch_result"]["status"] == "passed"
    assert summary["config"]["backend"] == "logging"
    calls = [line.split()[1] for line in log.read_text().splitlines()]
    # First the one query that finds this results folder's orphans to reap (none here).
    assert calls == [
        "list_runs",
        "prepare_images", "copy_from_image", "start", "wait", "collect_results", "cleanup",
    ]  # fmt: skip
    lines = log.read_text().splitlines()
    assert lines[1].endswith("sandbox tlvkit-heap-overflow reference prebuilt=False platform=None")
    assert lines[3].split()[2] == run_id
