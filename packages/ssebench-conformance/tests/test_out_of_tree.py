"""A backend package outside the workspace runs the suite with `pip install` and two factories.

The conformance package and ssebench-spec are built as wheels, installed into a
fresh venv far from this checkout (nothing else of SSEBench in it), and a tiny
backend of a third party's (a subclass of the shared fake) runs the engine-free
suite there with pytest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ssebench.conformance import select

pytestmark = pytest.mark.slow

WORKSPACE = Path(__file__).resolve().parents[3]

BACKEND = '''
"""Mine: a backend of a third party's, on the shared fake's platform."""

from ssebench.conformance.fake import FakeBackend


class MineBackend(FakeBackend):
    name = "mine"
'''

CONFTEST = """
import pytest

from ssebench.conformance import BackendFactory, ProbeImageFactory
from ssebench.conformance.fake import fake_probe_image
from mine import MineBackend


@pytest.fixture
def conformance_backend_factory() -> BackendFactory:
    return MineBackend


@pytest.fixture
def conformance_probe_image_factory() -> ProbeImageFactory:
    return fake_probe_image
"""

TEST_MODULE = """
from ssebench.conformance import conformance_tests

test_conformance = conformance_tests(engine=False)
"""


def uv() -> str:
    found = shutil.which("uv")
    tools = Path(os.environ.get("SSEBENCH_TOOLS") or Path.home() / ".local/share/ssebench")
    candidate = tools / "uv" / "bin" / "uv"
    if found:
        return found
    if candidate.is_file():
        return str(candidate)
    pytest.fail("uv is needed to build the wheels: run scripts/setup.sh")


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTEST_ADDOPTS")
    }
    env["UV_PYTHON_DOWNLOADS"] = "never"
    result = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, f"{' '.join(args)}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.process
def test_a_backend_outside_the_workspace_runs_the_engine_free_suite(tmp_path: Path) -> None:
    assert not tmp_path.is_relative_to(WORKSPACE)
    wheels = tmp_path / "wheels"
    for package in ("ssebench-spec", "ssebench-conformance"):
        run(uv(), "build", "--wheel", "--package", package, "--out-dir", str(wheels), cwd=WORKSPACE)
    built = sorted(path.name for path in wheels.glob("*.whl"))
    assert [name.split("-")[0] for name in built] == ["ssebench_conformance", "ssebench_spec"]

    venv = tmp_path / "venv"
    run(uv(), "venv", "--python", sys.executable, str(venv), cwd=tmp_path)
    python = str(venv / "bin" / "python")
    run(uv(), "pip", "install", "--python", python, *map(str, wheels.glob("*.whl")), cwd=tmp_path)

    project = tmp_path / "mine"
    project.mkdir()
    (project / "mine.py").write_text(BACKEND)
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_mine.py").write_text(TEST_MODULE)
    where = run(
        python,
        "-c",
        "import importlib.util as u, ssebench.conformance as c, ssebench.spec as s; "
        "print(c.__file__); print(s.__file__); "
        "print(u.find_spec('docker'), u.find_spec('ssebench.runner'))",
        cwd=project,
    ).stdout.splitlines()
    assert all(Path(path).is_relative_to(venv) for path in where[:2]), where
    assert where[2] == "None None", "the venv holds more than the two wheels and their needs"

    outcome = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", cwd=project)
    applicable = [check for check in select(engine=False) if check.applies_to(frozenset())]
    assert f"{len(applicable)} passed" in outcome.stdout, outcome.stdout
    assert "failed" not in outcome.stdout
