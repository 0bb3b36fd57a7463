"""Staging: what a check gets of /ssebench, and how the copies are written."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssebench.daemon.server._stage import (
    FILE_MODE,
    PROGRAM_MODE,
    Stage,
    StageError,
    named_files,
    support_files,
    task_path,
)
from ssebench.spec import load_task_config

from .fakes import make_task


def layout(task_dir: Path, files: list[str]) -> None:
    for name in files:
        path = task_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{name}\n")


NAMED = frozenset(
    {"config.yaml", "scripts/build.sh", "scripts/run.sh", "scripts/test.sh", "pocs/a.bin"}
)


def test_a_script_gets_the_unnamed_files_of_its_folder_never_another_script_or_named_file(
    tmp_path: Path,
) -> None:
    layout(
        tmp_path,
        [
            "config.yaml",
            "scripts/build.sh",
            "scripts/run.sh",
            "scripts/test.sh",
            "scripts/common.sh",
            "scripts/lib/flags.txt",
            "pocs/a.bin",
            "pocs/readme.txt",
            "other/notes.txt",
        ],
    )
    (tmp_path / "scripts" / "link").symlink_to(tmp_path / "pocs" / "a.bin")
    assert support_files(tmp_path, "scripts/build.sh", NAMED) == [
        "scripts/common.sh",
        "scripts/lib/flags.txt",
    ]


def test_a_script_at_the_top_skips_every_folder_that_holds_named_files(tmp_path: Path) -> None:
    layout(tmp_path, ["config.yaml", "build.sh", "helper.sh", "pocs/a.bin", "pocs/x", "tools/t"])
    named = frozenset({"config.yaml", "build.sh", "pocs/a.bin"})
    assert support_files(tmp_path, "build.sh", named) == ["helper.sh", "tools/t"]


def test_paths_outside_the_task_folder_are_refused() -> None:
    for bad in ("../etc/passwd", "/etc/passwd", "scripts/../../x", ".."):
        with pytest.raises(StageError):
            task_path(bad)
    assert task_path("scripts/./build.sh") == "scripts/build.sh"


@pytest.mark.process
def test_named_files_cover_the_config_the_hidden_material_and_every_script(
    tmp_path: Path,
) -> None:
    task = make_task(tmp_path, tmp_path / "sockets")
    named = named_files(load_task_config(task.config.task_config))
    assert named == {
        "config.yaml",
        "diffs/patch.diff",
        "diffs/test.diff",
        "pocs/first.txt",
        "pocs/second.txt",
        "reports/crash.txt",
        "scripts/build.sh",
        "scripts/run.sh",
        "scripts/test.sh",
    }


def test_staged_copies_keep_programs_runnable_and_never_replace_or_follow(
    tmp_path: Path,
) -> None:
    task_dir = tmp_path / "ssebench"
    layout(task_dir, ["scripts/build.sh", "scripts/data.txt", "scripts/test.sh"])
    (task_dir / "scripts" / "build.sh").chmod(0o755)
    (task_dir / "scripts" / "test.sh").chmod(0o644)
    stage_dir = tmp_path / "stage"
    stage_dir.mkdir(mode=0o750)
    stage = Stage(stage_dir, None)

    named = frozenset({"scripts/build.sh", "scripts/test.sh"})
    argv = stage.script(task_dir, "scripts/build.sh", named)
    build = stage_dir / "task" / "scripts" / "build.sh"
    assert argv == [str(build)]
    assert build.stat().st_mode & 0o777 == PROGRAM_MODE
    assert (stage_dir / "task" / "scripts" / "data.txt").stat().st_mode & 0o777 == FILE_MODE
    assert not (stage_dir / "task" / "scripts" / "test.sh").exists()

    other = tmp_path / "other-stage"
    other.mkdir(mode=0o750)
    tests = Stage(other, None).script(task_dir, "scripts/test.sh", named)
    assert tests == ["bash", str(other / "task" / "scripts" / "test.sh")]
    assert not (other / "task" / "scripts" / "build.sh").exists()

    # Nothing is written through a planted link, nor over an existing file.
    (stage_dir / "planted").symlink_to(tmp_path / "victim")
    with pytest.raises(FileExistsError):
        stage.write(b"x", "planted")
    assert not (tmp_path / "victim").exists()
    # A link in the task folder is never staged.
    (task_dir / "pocs").mkdir()
    (task_dir / "pocs" / "link").symlink_to("/etc/passwd")
    with pytest.raises(StageError):
        stage.copy(task_dir / "pocs" / "link", "poc-0-link")
    with pytest.raises(StageError):
        stage.copy(task_dir / "pocs" / "missing", "poc-0-missing")
    stage.discard("task/scripts/data.txt")
    stage.discard("task/scripts/data.txt")  # gone already is fine
    assert not (stage_dir / "task" / "scripts" / "data.txt").exists()
