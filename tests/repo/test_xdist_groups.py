"""The parallel tiers' groups (the root conftest.py's XDIST_GROUPS): under `-n N --dist
loadgroup`, tests that share a session's work run on one worker, and the named groups
are handed out first."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _root_conftest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_named_group_spans_modules_and_other_modules_are_groups_of_their_own() -> None:
    groups = _root_conftest().xdist_group_of
    assert groups("tests/integrity/test_bypass.py::test_x[sandbox]") == "integrity"
    assert groups("tests/integrity/test_hooks.py::test_y") == "integrity"
    assert groups("tests/gateway/test_opencode.py::test_x[a]") == "gateway-opencode"
    budget = "tests/gateway/test_gateway_budget.py"
    assert groups(f"{budget}::test_y") == budget
    assert groups("tests/images/test_runtime.py::test_z") == "tests/images/test_runtime.py"


def test_named_groups_are_handed_out_first_in_their_order_then_the_largest() -> None:
    rank = _root_conftest()._rank
    sizes = {"tests/a.py": 2, "tests/b.py": 3, "prebuilt": 1, "integrity": 1}
    assert sorted(sizes, key=lambda group: rank(group, sizes[group])) == [
        "integrity",
        "prebuilt",
        "tests/b.py",
        "tests/a.py",
    ]


@pytest.mark.process
def test_under_xdist_a_groups_modules_run_on_one_worker(tmp_path: Path) -> None:
    root = str(ROOT / "conftest.py")
    (tmp_path / "conftest.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('root_conftest', {root!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "pytest_xdist_make_scheduler = module.pytest_xdist_make_scheduler\n"
    )  # fmt: skip
    test = (
        "import os\n"
        "def test_{n}():\n"
        "    worker = os.environ['PYTEST_XDIST_WORKER']\n"
        "    open({out!r}, 'a').write(f'{name}{n} {{worker}}\\n')\n"
    )  # fmt: skip
    out = tmp_path / "workers.txt"
    modules = (
        ("tests/integrity", "a"),
        ("tests/integrity", "b"),
        ("tests/c", "c"),
        ("tests/d", "d"),
    )
    for folder, name in modules:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        body = "".join(test.format(n=n, out=str(out), name=name) for n in range(4))
        (tmp_path / folder / f"test_{name}.py").write_text(body)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-c", "/dev/null", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    entries = [line.split() for line in out.read_text().splitlines()]
    assert sorted(test for test, _ in entries) == [f"{m}{n}" for m in "abcd" for n in range(4)]
    ran: dict[str, set[str]] = {}
    for test, worker in entries:
        ran.setdefault(test[0], set()).add(worker)
    assert len(ran["a"] | ran["b"]) == 1, ran  # the integrity group: one worker
    assert len(ran["c"]) == len(ran["d"]) == 1, ran  # every other module: one worker each
