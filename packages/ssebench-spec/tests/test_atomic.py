from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ssebench.spec.atomic import atomic_file, write_atomically


def _names(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir())


def test_a_write_replaces_the_file_whole_and_private(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    target.write_bytes(b"old")
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert _names(tmp_path) == ["result.json"]


def test_a_link_at_the_target_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    target = tmp_path / "result.json"
    target.symlink_to(victim)
    write_atomically(target, b"new")
    assert not target.is_symlink()
    assert target.read_bytes() == b"new"
    assert victim.read_bytes() == b"keep"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_file(target) as file:
        file.write(b"half")
        raise RuntimeError("interrupted")
    assert target.read_bytes() == b"old"
    assert _names(tmp_path) == ["summary.json"]


def test_two_writers_never_share_a_temporary_name(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    with atomic_file(target) as first, atomic_file(target) as second:
        temporaries = [name for name in _names(tmp_path) if name.endswith(".tmp")]
        assert len(temporaries) == 2
        first.write(b"1")
        second.write(b"2")
    assert target.read_bytes() in (b"1", b"2")
    assert _names(tmp_path) == ["run.json"]


def test_the_mode_is_the_callers(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomically(tmp_path / "shared", b"x", mode=0o666)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "shared").stat().st_mode) == 0o644
