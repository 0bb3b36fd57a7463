"""Staging: root copies exactly what one check needs into the check's private `stage/`.

Rule enforced (docs/integrity.md): hidden files are root-only until staged into a
check's private copy. /ssebench is root's (0700 throughout in current tool
layers; older layers let sse-runner read the scripts, and staging works the
same there): for each check root reads what it needs and writes copies into
its `stage/` (root:sse-runner, folders 0750, files 0640, programs 0750), which
only that check's sse-runner processes can read and which goes with the check.

What a check needs: the script it runs, with its support files — the other
regular files below the script's folder that the task config does not name
(as hidden material or as another script), outside any sub-folder that holds
a named file — so a build never sees run.sh, test.sh or a PoC; the PoCs one
at a time, each with its folder (the unnamed files beside it, chosen the same
way, so a PoC that needs a go.mod or a helper beside it runs as written, but
never another PoC); the hidden tests; the agent's diff. Scripts keep their
place under /ssebench below `stage/task/`, so a script finds its support files
beside it; PoC number n keeps its place below `stage/poc-<n>/`. Copies are
created relative to `stage/`'s descriptor with O_CREAT|O_EXCL|O_NOFOLLOW,
never through a link; links and special files of the task folder are never
staged.
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path
from typing import Final

from ssebench.spec import TaskConfig

SCRIPTS_PLACE: Final = "task"
"""The folder of `stage/` where staged scripts keep their place under /ssebench."""

FOLDER_MODE: Final = 0o750
FILE_MODE: Final = 0o640
PROGRAM_MODE: Final = 0o750

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK: Final = 1 << 20


class StageError(OSError):
    """Something a check needs cannot be staged (missing, a link, outside the task folder)."""


def task_path(relative: str) -> str:
    """A path from the task config, normalised; it must stay inside the task folder.

    Raises:
        StageError: it does not.
    """
    path = posixpath.normpath(relative)
    if path in (".", "..") or path.startswith(("/", "../")):
        raise StageError(f"the task config names a file outside the task folder: {relative!r}")
    return path


def named_files(task: TaskConfig) -> frozenset[str]:
    """Every file under /ssebench the task config names: its own config, hidden material,
    reports and scripts."""
    files, scripts = task.files, task.scripts
    named = [
        "config.yaml",
        files.patch,
        *files.poc,
        files.future_test,
        files.security_test,
        files.intent_test,
        *task.task_description.crash_report,
        scripts.build,
        scripts.run,
        scripts.test,
    ]
    return frozenset(posixpath.normpath(path) for path in named if path)


def support_files(task_dir: Path, script: str, named: frozenset[str]) -> list[str]:
    """The support files of `script` (see the module docstring), relative to `task_dir`.

    /ssebench is root's, so it is read by path.
    """
    script = task_path(script)
    folder = posixpath.dirname(script)
    holders = {posixpath.dirname(path) for path in named}
    for path in list(holders):
        while path:
            path = posixpath.dirname(path)
            holders.add(path)
    found: list[str] = []
    pending = [folder]
    while pending:
        here = pending.pop()
        try:
            entries = list(os.scandir(task_dir / here if here else task_dir))
        except OSError:
            continue
        for entry in entries:
            relative = posixpath.join(here, entry.name) if here else entry.name
            if entry.is_dir(follow_symlinks=False):
                if relative not in holders:
                    pending.append(relative)
            elif entry.is_file(follow_symlinks=False) and relative not in named:
                found.append(relative)
    return sorted(found)


class Stage:
    """One check's `stage/` folder (made by the check runner), written through its descriptor.

    Args:
        path: the folder.
        gid: the group that may read the copies (sse-runner's), or None when the daemon
            is not root and cannot give files away.
    """

    def __init__(self, path: Path, gid: int | None) -> None:
        self.path = path
        self.gid = gid

    def _hand_over(self, fd: int, mode: int) -> None:
        if self.gid is not None:
            os.fchown(fd, 0, self.gid)
        os.fchmod(fd, mode)

    def _folder(self, parts: list[str]) -> int:
        """Open (making them as needed) the folders `parts` below `stage/`."""
        fd = os.open(self.path, _DIR_FLAGS)
        try:
            for part in parts:
                made = True
                try:
                    os.mkdir(part, FOLDER_MODE, dir_fd=fd)
                except FileExistsError:
                    made = False
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                if made:
                    self._hand_over(fd, FOLDER_MODE)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _create(self, relative: str) -> tuple[int, Path]:
        """Create the new file `relative` (folders made as needed): (open descriptor, path)."""
        parts = task_path(relative).split("/")
        folder = self._folder(parts[:-1])
        try:
            fd = os.open(parts[-1], _NEW_FLAGS, 0o600, dir_fd=folder)
        finally:
            os.close(folder)
        return fd, self.path.joinpath(*parts)

    def write(self, data: bytes, relative: str) -> Path:
        """Stage `data` as a new file.

        Returns:
            The staged file's path.

        Raises:
            OSError: it cannot be written (e.g. it exists).
        """
        fd, path = self._create(relative)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            self._hand_over(file.fileno(), FILE_MODE)
        return path

    def copy(self, source: Path, relative: str) -> Path:
        """Stage a copy of the regular file `source` (never followed if a link).

        Returns:
            The staged file's path; a program (any execute bit) stays one.

        Raises:
            StageError: `source` is missing, a link or not a regular file.
            OSError: the copy cannot be written.
        """
        try:
            src = os.open(source, _READ_FLAGS)
        except OSError as exc:
            raise StageError(f"cannot stage {source}: {exc.strerror}") from exc
        with os.fdopen(src, "rb") as reader:
            info = os.fstat(reader.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise StageError(f"cannot stage {source}: not a regular file")
            mode = PROGRAM_MODE if info.st_mode & 0o111 else FILE_MODE
            fd, path = self._create(relative)
            with os.fdopen(fd, "wb") as writer:
                while chunk := reader.read(_CHUNK):
                    writer.write(chunk)
                self._hand_over(writer.fileno(), mode)
        return path

    def script(self, task_dir: Path, script: str, named: frozenset[str]) -> list[str]:
        """Stage a task script with its support files.

        Returns:
            The command that runs the staged script (through bash when it is not a program).

        Raises:
            StageError: the script cannot be staged.
            OSError: a copy cannot be written.
        """
        script = task_path(script)
        for support in support_files(task_dir, script, named):
            self.copy(task_dir / support, posixpath.join(SCRIPTS_PLACE, support))
        staged = self.copy(task_dir / script, posixpath.join(SCRIPTS_PLACE, script))
        if staged.stat().st_mode & 0o100:
            return [str(staged)]
        return ["bash", str(staged)]

    def poc(self, task_dir: Path, poc: str, named: frozenset[str], place: str) -> Path:
        """Stage a PoC with its folder (its support files) below `place`.

        Returns:
            The staged PoC's path, which `run.sh` receives.

        Raises:
            StageError: the PoC cannot be staged.
            OSError: a copy cannot be written.
        """
        poc = task_path(poc)
        for support in support_files(task_dir, poc, named):
            self.copy(task_dir / support, posixpath.join(place, support))
        return self.copy(task_dir / poc, posixpath.join(place, poc))

    def discard(self, relative: str) -> None:
        """Remove one staged file (gone already is fine)."""
        parts = task_path(relative).split("/")
        try:
            folder = self._folder(parts[:-1])
        except FileNotFoundError:
            return
        try:
            os.unlink(parts[-1], dir_fd=folder)
        except FileNotFoundError:
            pass
        finally:
            os.close(folder)
