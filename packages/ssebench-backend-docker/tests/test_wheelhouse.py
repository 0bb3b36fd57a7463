"""The runtime's packages are prepared on the host from uv.lock and cached by their inputs."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from ssebench.backends.docker import _wheelhouse as wheelhouse
from ssebench.backends.docker import prepare_runtime_packages
from ssebench.backends.docker._wheelhouse import (
    CACHE_ENV,
    PackageTree,
    _cached_tree,
    _strip_host_specifics,
    cache_root,
    find_uv,
)
from ssebench.spec import find_home

HOME = find_home(Path(__file__).resolve().parent)


def test_the_cache_folder_is_ssebench_cache_dir_when_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "ssebench"


@pytest.mark.process
@pytest.mark.slow
def test_packages_come_from_the_lock_once_and_then_from_the_cache_until_the_source_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    find_uv()
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    said: list[str] = []
    first = prepare_runtime_packages(HOME, say=said.append)
    assert not first.dependencies.reused and not first.workspace.reused
    assert Path(tmp_path / "cache") in first.dependencies.folder.parents

    deps, ours = first.dependencies.folder, first.workspace.folder
    assert sorted(p.name for p in (ours / "ssebench").iterdir()) == ["daemon", "extensions", "spec"]
    assert not (ours / "ssebench" / "__init__.py").exists(), "a PEP 420 namespace"
    assert (deps / "msgspec").is_dir() and (deps / "yaml").is_dir()
    assert not (deps / "ssebench").exists(), "the workspace's packages are in their own tree"
    for tree in (deps, ours):
        assert not (tree / "bin").exists() and not (tree / ".lock").exists()
        assert not list(tree.glob("*.dist-info/direct_url.json"))
        assert not list(tree.glob("*.dist-info/uv_cache.json"))
        for record in tree.glob("*.dist-info/RECORD"):
            for row in record.read_text().splitlines():
                assert (tree / row.split(",")[0]).is_file(), f"{record}: {row}"
    # Wheels for the runtime's CPython 3.11 on x86_64 Linux, whatever the host's Python.
    assert list((deps / "msgspec").glob("_core.cpython-311-x86_64-linux-gnu.so"))

    again = prepare_runtime_packages(HOME, say=said.append)
    assert again.dependencies.reused and again.workspace.reused
    assert (again.dependencies.key, again.workspace.key) == (
        first.dependencies.key,
        first.workspace.key,
    )
    assert said[-2:] == [
        f"packages: reusing the dependencies tree {deps}",
        f"packages: reusing the workspace tree {ours}",
    ]

    # A copy of the workspace whose daemon changed: a new workspace tree, the same dependencies.
    home = tmp_path / "home"
    shutil.copytree(
        HOME / "packages", home / "packages", ignore=shutil.ignore_patterns(".venv", "__pycache__")
    )
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy2(HOME / name, home / name)
    (
        home / "packages" / "ssebench-daemon" / "src" / "ssebench" / "daemon" / "_added.py"
    ).write_text("X = 1\n")
    changed = prepare_runtime_packages(home)
    assert changed.dependencies.reused and changed.dependencies.key == first.dependencies.key
    assert not changed.workspace.reused and changed.workspace.key != first.workspace.key
    assert (changed.workspace.folder / "ssebench" / "daemon" / "_added.py").is_file()

    # Another checkout and another cache folder prepare a byte-identical tree from the lock.
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "other-cache"))
    elsewhere = prepare_runtime_packages(home)
    assert not elsewhere.dependencies.reused
    assert _contents(elsewhere.dependencies.folder) == _contents(deps)


def _contents(tree: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(tree)): path.read_bytes() if path.is_file() else None
        for path in sorted(tree.rglob("*"))
    }


def test_two_builders_preparing_the_same_tree_at_once_fill_it_once_and_both_get_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    fills: list[int] = []

    def fill(_work: Path, tree: Path) -> None:
        fills.append(1)
        time.sleep(0.5)  # the second builder arrives meanwhile, and waits
        tree.mkdir()
        (tree / "module.py").write_text("X = 1\n")

    trees: list[PackageTree] = []
    threads = [
        threading.Thread(
            target=lambda: trees.append(_cached_tree("kind", "k" * 64, False, print, fill))
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(fills) == 1
    assert len(trees) == 2 and trees[0].folder == trees[1].folder
    assert sorted(t.reused for t in trees) == [False, True]
    assert (trees[0].folder / "module.py").read_text() == "X = 1\n"
    assert sorted(p.name for p in (tmp_path / "runtime-packages").iterdir()) == ["kind-" + "k" * 32]


def test_what_an_install_writes_about_the_host_is_removed_with_its_record_rows(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "site-packages"
    info = tree / "tool-1.0.dist-info"
    (tree / "bin").mkdir(parents=True)
    (tree / "tool").mkdir()
    info.mkdir()
    (tree / "bin" / "tool").write_text(f"#!{tmp_path}/.venv/bin/python\n")
    (tree / "tool" / "__init__.py").write_text("")
    (tree / "tool" / "a,b.py").write_text("")
    (tree / ".lock").write_text("")
    (info / "direct_url.json").write_text(f'{{"url": "file://{tmp_path}/tool.whl"}}')
    (info / "uv_cache.json").write_text('{"timestamp": 1}')
    (info / "RECORD").write_text(
        "bin/tool,sha256=host,30\n"
        "tool/__init__.py,sha256=x,0\n"
        '"tool/a,b.py",sha256=y,0\n'
        "tool-1.0.dist-info/direct_url.json,sha256=host,40\n"
        "tool-1.0.dist-info/uv_cache.json,sha256=now,16\n"
        "../../outside,sha256=z,1\n"
        "tool-1.0.dist-info/RECORD,,\n"
    )
    _strip_host_specifics(tree)
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == [
        "tool",
        "tool-1.0.dist-info",
        "tool-1.0.dist-info/RECORD",
        "tool/__init__.py",
        "tool/a,b.py",
    ]
    assert (info / "RECORD").read_text() == (
        'tool/__init__.py,sha256=x,0\n"tool/a,b.py",sha256=y,0\ntool-1.0.dist-info/RECORD,,\n'
    )


def test_the_export_of_the_lock_is_kept_until_the_lock_or_a_pyproject_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / "packages" / "one").mkdir(parents=True)
    (home / "uv.lock").write_text("lock 1\n")
    (home / "pyproject.toml").write_text("[project]\n")
    (home / "packages" / "one" / "pyproject.toml").write_text("[project]\nname = 'one'\n")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    exports: list[str] = []

    def fake_uv(uv: str, at: Path, *args: str) -> str:
        assert args[0] == "export" and at == home
        exports.append((home / "uv.lock").read_text())
        return f"exported from {exports[-1]}"

    monkeypatch.setattr(wheelhouse, "_uv", fake_uv)
    uv = find_uv()
    assert wheelhouse._export(uv, home, force=False) == "exported from lock 1\n"
    assert wheelhouse._export(uv, home, force=False) == "exported from lock 1\n"
    assert len(exports) == 1, "the kept export was used"
    (home / "packages" / "one" / "pyproject.toml").write_text("[project]\nname = 'two'\n")
    wheelhouse._export(uv, home, force=False)
    (home / "uv.lock").write_text("lock 2\n")
    assert wheelhouse._export(uv, home, force=False) == "exported from lock 2\n"
    assert wheelhouse._export(uv, home, force=True) == "exported from lock 2\n"
    assert len(exports) == 4
