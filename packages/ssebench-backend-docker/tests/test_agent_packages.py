"""agent.yaml `packages`: the dispatcher, the cache, the build context and the image's identity."""

from __future__ import annotations

import os
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from ssebench.backends.docker import _agent_packages
from ssebench.backends.docker._agent_packages import (
    PreparedKind,
    agent_context,
    packages_inputs,
    prepare_packages,
    prepare_pypi,
)
from ssebench.spec import Agent, AgentPackages


def make_agent(folder: Path, pypi: Sequence[str] = ()) -> Agent:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\n")
    (folder / "run.sh").write_text("#!/bin/bash\n")
    return Agent(
        name="a",
        version="1",
        uses_model=True,
        folder=str(folder),
        packages=AgentPackages(pypi=list(pypi)),
    )


def test_an_agent_without_packages_prepares_nothing_and_builds_from_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(pins: Sequence[str], say: object) -> PreparedKind:
        raise AssertionError("nothing may be prepared")

    monkeypatch.setattr(_agent_packages, "PREPARERS", {"pypi": refuse})
    agent = make_agent(tmp_path / "agent")

    prepared = prepare_packages(agent, print)

    assert prepared == []
    assert agent_context(agent, prepared) == Path(agent.folder)
    assert packages_inputs(prepared) == []


def test_the_dispatcher_calls_one_preparer_per_kind_with_its_pins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, list[str]]] = []

    def fake(kind: str) -> object:
        def prepare(pins: Sequence[str], say: object) -> PreparedKind:
            seen.append((kind, list(pins)))
            return PreparedKind(kind, tmp_path, f"key-{kind}")

        return prepare

    monkeypatch.setattr(_agent_packages, "PREPARERS", {"pypi": fake("pypi"), "npm": fake("npm")})
    agent = make_agent(tmp_path / "agent", ["mini-swe-agent==2.4.6"])

    prepared = prepare_packages(agent, print)

    assert seen == [("pypi", ["mini-swe-agent==2.4.6"])]  # npm names nothing: not called
    assert packages_inputs(prepared) == ["pypi:key-pypi"]


@pytest.mark.process
def test_a_prepared_pypi_folder_is_reused_from_the_cache_and_a_changed_pin_gets_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_agent_packages, "find_uv", lambda: "/nonexistent/uv")
    # Fill the cache as a download would have, for one pin.
    with pytest.raises(Exception, match="cannot run uv"):
        prepare_pypi(["x==1"], print)
    root = tmp_path / "cache" / "agent-packages"
    assert [p.name for p in root.iterdir()] == []  # nothing half-made left behind
    first = _agent_packages._cached("pypi", _key(["x==1"]), print, lambda f: f.mkdir())
    said: list[str] = []

    again = prepare_pypi(["x==1"], said.append)
    other_key = _key(["x==2"])

    assert again == first and said == [f"pypi packages: reusing {first.folder.parent}"]
    assert other_key != first.key


def _key(pins: list[str]) -> str:
    import hashlib

    parts = [
        _agent_packages.RECIPE,
        _agent_packages.PIP_VERSION,
        _agent_packages.PYTHON_VERSION,
        *_agent_packages.PYPI_PLATFORMS,
        *sorted(pins),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def test_the_build_context_holds_the_agents_files_and_the_prepared_packages(
    tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path / "agent", ["x==1"])
    folder = Path(agent.folder)
    (folder / ".dockerignore").write_text("# comment\nsecret.txt\n")
    (folder / "secret.txt").write_text("left out")
    (folder / "packages" / "pypi").mkdir(parents=True)
    (folder / "packages" / "pypi" / "own.whl").write_text("the agent's own: left out")
    (folder / "packages" / "other.txt").write_text("kept")
    wheels = tmp_path / "prepared"
    wheels.mkdir()
    (wheels / "x-1-py3-none-any.whl").write_bytes(b"wheel")
    (wheels / "requirements.txt").write_text("x==1\n")

    context = agent_context(agent, [PreparedKind("pypi", wheels, "k")])
    assert callable(context)
    with context() as stream, tarfile.open(fileobj=stream) as tar:
        members = {m.name: m for m in tar.getmembers()}
        wheel = tar.extractfile(members["packages/pypi/x-1-py3-none-any.whl"])
        assert wheel is not None and wheel.read() == b"wheel"

    names = set(members)
    assert {"Dockerfile", "run.sh", ".dockerignore", "packages/other.txt"} <= names
    assert "packages/pypi/requirements.txt" in names
    assert "secret.txt" not in names and "packages/pypi/own.whl" not in names
    assert all(m.uid == 0 and m.gid == 0 for m in members.values())


def test_a_new_preparation_removes_the_folders_unused_for_30_days_and_keeps_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    old = _agent_packages._cached("pypi", "a" * 64, print, lambda f: f.mkdir())
    used = _agent_packages._cached("npm", "b" * 64, print, lambda f: f.mkdir())
    root = tmp_path / "cache" / "agent-packages"
    dead_work = root / ".pypi-cccc.x1y2"
    dead_work.mkdir()
    month_ago = time.time() - 31 * 24 * 3600
    for folder in (old.folder.parent, used.folder.parent, dead_work):
        os.utime(folder, (month_ago, month_ago))
    _agent_packages._cached("npm", "b" * 64, print, lambda f: f.mkdir())  # used again now
    said: list[str] = []

    new = _agent_packages._cached("pypi", "d" * 64, said.append, lambda f: f.mkdir())

    assert sorted(p.name for p in root.iterdir()) == sorted(
        [used.folder.parent.name, new.folder.parent.name]
    )
    assert sorted(said) == sorted(
        f"agent packages: removing {folder}, unused for 30 days"
        for folder in (old.folder.parent, dead_work)
    )
