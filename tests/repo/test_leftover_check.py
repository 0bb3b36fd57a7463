"""The suite's closing check (tests/conftest.py): what a session leaves on the engine fails
it; what was there before it started (a killed earlier session's container) does not.

A real inner pytest session against the real engine, with the check's hooks loaded.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tests" / "conftest.py"
LABEL = "ssebench.test-leftover"

# Alone: a parallel test's run, up while the inner session ends, would count as its own.
pytestmark = [pytest.mark.docker, pytest.mark.alone]


@pytest.fixture
def marked(docker_client: docker.DockerClient) -> Iterator[str]:
    """A value of LABEL; every container carrying it is removed afterwards."""
    value = secrets.token_hex(4)
    yield value
    for container in docker_client.containers.list(all=True, filters={"label": f"{LABEL}={value}"}):
        container.remove(force=True)


def _session(tmp_path: Path, base_image: str, marked: str, *, leave: bool) -> str:
    """Run one inner session whose Docker test leaves a container (or not); its output."""
    tmp_path.mkdir()
    (tmp_path / "conftest.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('tests_conftest', {str(CHECK)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "globals().update((k, v) for k, v in vars(module).items() if k.startswith('pytest_'))\n"
    )  # fmt: skip
    (tmp_path / "test_inner.py").write_text(
        "import docker, pytest\n"
        "@pytest.mark.docker\n"
        "def test_one():\n"
        f"    if {leave!r}:\n"
        f"        docker.from_env().containers.create({base_image!r}, 'true',\n"
        f"            name='ssebench-left-{marked}', labels={{{LABEL!r}: {marked!r}}})\n"
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-o", "markers=docker", "-c", "/dev/null", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, check=False,
        env={**{k: v for k, v in os.environ.items() if k != "CI"}, "SSEBENCH_CHECK_LEFTOVERS": "1"},
    )  # fmt: skip
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def test_a_container_the_session_leaves_fails_it_one_from_before_does_not(
    docker_client: docker.DockerClient, base_image: str, marked: str, tmp_path: Path
) -> None:
    docker_client.containers.create(  # removed with the others by `marked`
        base_image, "true", name=f"ssebench-before-{marked}", labels={LABEL: marked}
    )
    clean = _session(tmp_path / "clean", base_image, marked, leave=False)
    assert clean.startswith("exit 0\n"), clean
    assert f"on the engine before the suite: container ssebench-before-{marked}" in clean
    assert "left behind" not in clean

    leaving = _session(tmp_path / "leaving", base_image, marked, leave=True)
    assert leaving.startswith("exit 1\n"), leaving
    line = next(line for line in leaving.splitlines() if "left behind" in line)
    assert f"container ssebench-left-{marked}" in line
    assert f"ssebench-before-{marked}" not in line
