"""What a pod's tar stream may carry into the run directory (the agent wrote half of it)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from ssebench.backends.k8s import _copyout
from ssebench.spec import contract


def _tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> io.BytesIO:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for info, content in members:
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    data.seek(0)
    return data


def _file(name: str, content: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(content), mode
    return info, content


def _special(name: str, kind: bytes, target: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "archive").mkdir()
    (tmp_path / "result.json").write_text("")
    return {"results": tmp_path, "archive": tmp_path / "archive"}


def test_files_replace_the_skeleton_and_keep_their_content(roots: dict[str, Path]) -> None:
    report = _copyout.extract(
        _tar(_file("results/result.json", b'{"a": 1}'), _file("archive/sub/d.jsonl", b"x\n")),
        roots,
    )
    assert not report
    assert (roots["results"] / "result.json").read_bytes() == b'{"a": 1}'
    assert (roots["archive"] / "sub/d.jsonl").read_bytes() == b"x\n"


def test_links_devices_fifos_and_hard_links_are_left_out(roots: dict[str, Path]) -> None:
    report = _copyout.extract(
        _tar(
            _special("archive/sym", tarfile.SYMTYPE, "/etc/shadow"),
            _special("archive/hard", tarfile.LNKTYPE, "results/result.json"),
            _special("archive/fifo", tarfile.FIFOTYPE),
            _special("archive/dev", tarfile.CHRTYPE),
        ),
        roots,
    )
    assert sorted(p.name for p in roots["archive"].iterdir()) == []
    assert len(report.refused) == 4


def test_names_leading_out_are_refused(roots: dict[str, Path], tmp_path: Path) -> None:
    report = _copyout.extract(
        _tar(_file("archive/../../outside", b"no"), _file("archive//etc/x", b"no")), roots
    )
    assert not (tmp_path.parent / "outside").exists()
    assert report.refused


def test_a_link_already_in_the_run_directory_is_never_followed(
    roots: dict[str, Path], tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (roots["archive"] / "dialog.jsonl").symlink_to(victim)
    (roots["archive"] / "sub").symlink_to(tmp_path.parent)
    report = _copyout.extract(
        _tar(_file("archive/dialog.jsonl", b"new"), _file("archive/sub/x", b"new")), roots
    )
    assert victim.read_text() == "keep"
    assert not (tmp_path.parent / "x").exists()
    assert report.refused == ["archive/dialog.jsonl", "archive/sub/x"]


def test_special_and_write_bits_are_cleared(roots: dict[str, Path]) -> None:
    _copyout.extract(_tar(_file("archive/suid", b"x", mode=0o6777)), roots)
    assert (roots["archive"] / "suid").stat().st_mode & 0o7777 == 0o755


def test_a_large_file_is_capped_with_the_marker(
    roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_copyout, "FILE_LIMIT", 4)
    report = _copyout.extract(_tar(_file("results/agent.log", b"0123456789")), roots)
    assert (roots["results"] / "agent.log").read_bytes() == b"0123" + (
        contract.output_cap_line(4, 6).encode()
    )
    assert report.capped == ["results/agent.log"]
