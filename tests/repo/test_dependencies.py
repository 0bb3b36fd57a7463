"""Each package declares what its code imports, and imports what it declares.

A module that works only because another package happens to pull in its
dependency breaks the day that package drops it; a runtime dependency that
only tests use ships to every container for nothing. This reads each
package's `src/` with `ast` (every import, also those inside functions and
under TYPE_CHECKING) and compares it with `[project] dependencies`.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())

LOADED_BY_ENTRY_POINT = {
    # `ssebench` finds the default backend and the `runs` commands through entry
    # points (never by import), so a plain `pip install ssebench-runner` has them; its
    # extra `k8s` brings the Kubernetes backend the same way.
    "ssebench-runner": {"ssebench-backend-docker", "ssebench-runs", "ssebench-backend-k8s"},
    # uvicorn serves the terminal's WebSocket with it (`ws="websockets-sansio"`).
    "ssebench-web": {"websockets"},
}
"""Declared dependencies a package uses without importing them."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(package: Path) -> set[str]:
    """`dependencies` and every extra's (an import needing an extra is declared there)."""
    project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {}).values()
    every = [*project["dependencies"], *(dep for extra in extras for dep in extra)]
    return {_normal(re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0]) for dep in every}


def _imports(package: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted((package / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                yield from ((alias.name, path) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield node.module, path


def _workspace_owner(module: str) -> str | None:
    """The workspace package whose `src/` holds `module` (`ssebench.x.y`), if any."""
    parts = module.split(".")
    # Deepest first: `ssebench/backends/` is in two packages, `backends/docker/` in one.
    for depth in range(len(parts), 1, -1):
        for package in PACKAGES:
            base = package / "src" / Path(*parts[:depth])
            if base.is_dir() or base.with_suffix(".py").is_file():
                return package.name
    return None


@functools.cache
def _installed() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _distributions(module: str) -> set[str]:
    top = module.split(".")[0]
    found = _installed().get(top, [])
    return {_normal(name) for name in found}


def _used(package: Path) -> dict[str, list[str]]:
    """Distribution -> the modules of `package` importing it (the package itself excluded)."""
    used: dict[str, list[str]] = {}
    for module, path in _imports(package):
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or module == "ssebench" or top == "__future__":
            continue
        if top == "ssebench":
            owner = _workspace_owner(module)
            assert owner is not None, f"{path}: {module} belongs to no workspace package"
            names = {owner}
        else:
            names = _distributions(module)
            assert names, f"{path}: no installed distribution provides {module}"
        for name in names - {package.name}:
            used.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return used


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_every_import_is_a_declared_dependency(package: Path) -> None:
    declared = _declared(package)
    undeclared = {name: where[0] for name, where in _used(package).items() if name not in declared}
    assert not undeclared, f"{package.name} imports but does not declare: {undeclared}"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_every_declared_dependency_is_imported(package: Path) -> None:
    unused = (
        _declared(package) - set(_used(package)) - LOADED_BY_ENTRY_POINT.get(package.name, set())
    )
    assert not unused, f"{package.name} declares but never imports: {sorted(unused)}"


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    """The scan itself: a module importing an undeclared library is caught."""
    (tmp_path / "src" / "ssebench" / "probe").mkdir(parents=True)
    (tmp_path / "src" / "ssebench" / "probe" / "mod.py").write_text(
        "import os\nfrom yaml import safe_load\n\ndef f():\n    import msgspec\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "probe"\ndependencies = ["PyYAML>=6"]\n'
    )
    used = {name for name, _ in _imports(tmp_path)}
    assert used == {"os", "yaml", "msgspec"}
    assert _declared(tmp_path) == {"pyyaml"}
    assert _distributions("msgspec") == {"msgspec"}
