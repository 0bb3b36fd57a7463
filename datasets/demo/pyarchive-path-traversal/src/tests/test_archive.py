import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pyarchive import ArchiveError, create_archive, extract_all, list_members

PROJECT = Path(__file__).resolve().parent.parent


def make_tree(root: Path) -> None:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "readme.txt").write_text("hello\n")
    (root / "bin").mkdir()
    (root / "bin" / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "bin" / "tool.sh").chmod(0o755)
    (root / "data.bin").write_bytes(bytes(range(256)) * 40)


def test_a_created_archive_extracts_to_the_same_tree(tmp_path):
    make_tree(tmp_path / "in")
    names = create_archive(tmp_path / "a.zip", tmp_path / "in")
    assert names == ["bin", "bin/tool.sh", "data.bin", "docs", "docs/readme.txt"]
    assert [m.name for m in list_members(tmp_path / "a.zip")] == [
        "bin/",
        "bin/tool.sh",
        "data.bin",
        "docs/",
        "docs/readme.txt",
    ]

    written = extract_all(tmp_path / "a.zip", tmp_path / "out")

    assert sorted(Path(p).relative_to(tmp_path / "out").as_posix() for p in written) == [
        "bin/tool.sh",
        "data.bin",
        "docs/readme.txt",
    ]
    assert (tmp_path / "out" / "docs" / "readme.txt").read_text() == "hello\n"
    assert (tmp_path / "out" / "data.bin").read_bytes() == bytes(range(256)) * 40


def test_file_modes_are_restored_without_setuid(tmp_path):
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as zf:
        info = zipfile.ZipInfo("run.sh")
        info.external_attr = (stat.S_IFREG | stat.S_ISUID | 0o750) << 16
        zf.writestr(info, "#!/bin/sh\n")
        info = zipfile.ZipInfo("plain.txt")
        info.external_attr = (stat.S_IFREG | 0o640) << 16
        zf.writestr(info, "x")

    extract_all(tmp_path / "a.zip", tmp_path / "out")

    assert stat.S_IMODE(os.stat(tmp_path / "out" / "run.sh").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "out" / "plain.txt").st_mode) == 0o640


def test_existing_files_are_kept_unless_overwrite_is_given(tmp_path):
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as zf:
        zf.writestr("f.txt", "new")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "f.txt").write_text("old")

    with pytest.raises(ArchiveError, match="exists"):
        extract_all(tmp_path / "a.zip", tmp_path / "out")
    assert (tmp_path / "out" / "f.txt").read_text() == "old"

    extract_all(tmp_path / "a.zip", tmp_path / "out", overwrite=True)
    assert (tmp_path / "out" / "f.txt").read_text() == "new"


def test_list_members_reports_names_sizes_and_kinds(tmp_path):
    make_tree(tmp_path / "in")
    create_archive(tmp_path / "a.zip", tmp_path / "in")

    members = {m.name: m for m in list_members(tmp_path / "a.zip")}

    assert members["data.bin"].size == 256 * 40
    assert members["bin/tool.sh"].mode & 0o777 == 0o755
    assert members["docs/"].is_dir and not members["docs/readme.txt"].is_dir


def test_a_file_that_is_not_an_archive_is_an_archive_error(tmp_path):
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    with pytest.raises(ArchiveError, match="cannot read archive"):
        extract_all(tmp_path / "junk.zip", tmp_path / "out")
    with pytest.raises(ArchiveError):
        list_members(tmp_path / "missing.zip")


def test_the_command_line_extracts_and_reports_errors(tmp_path):
    make_tree(tmp_path / "in")
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "PYTHONDONTWRITEBYTECODE": "1"}
    run = [sys.executable, "-m", "pyarchive"]

    created = subprocess.run(
        [*run, "create", str(tmp_path / "a.zip"), str(tmp_path / "in")],
        env=env,
        capture_output=True,
        text=True,
    )
    extracted = subprocess.run(
        [*run, "extract", str(tmp_path / "a.zip"), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
    )
    again = subprocess.run(
        [*run, "extract", str(tmp_path / "a.zip"), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
    )

    assert created.returncode == 0, created.stderr
    assert extracted.returncode == 0, extracted.stderr
    assert (tmp_path / "out" / "bin" / "tool.sh").exists()
    assert again.returncode == 1
    assert "exists" in again.stderr
