"""The archive functions.

pyarchive writes its own extraction loop instead of using
`zipfile.ZipFile.extractall` so that it can restore Unix file modes, refuse
to overwrite existing files, and report what it wrote.
"""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_DEFAULT_FILE_MODE = 0o644
_DEFAULT_DIR_MODE = 0o755


class ArchiveError(ValueError):
    """The archive is unreadable or cannot be extracted as asked."""


@dataclass(frozen=True)
class Member:
    """One entry of an archive."""

    name: str
    size: int
    mode: int
    is_dir: bool


def _mode_of(info: zipfile.ZipInfo) -> int:
    mode = (info.external_attr >> 16) & 0o7777
    if mode:
        return mode & ~(stat.S_ISUID | stat.S_ISGID)
    return _DEFAULT_DIR_MODE if info.is_dir() else _DEFAULT_FILE_MODE


def _open(archive: str | os.PathLike[str]) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as error:
        raise ArchiveError(f"cannot read archive {os.fspath(archive)!r}: {error}") from error


def list_members(archive: str | os.PathLike[str]) -> list[Member]:
    """The entries of `archive`, in archive order."""
    with _open(archive) as zf:
        return [
            Member(
                name=info.filename, size=info.file_size, mode=_mode_of(info), is_dir=info.is_dir()
            )
            for info in zf.infolist()
        ]


def create_archive(
    archive: str | os.PathLike[str],
    root: str | os.PathLike[str],
    paths: Iterable[str] | None = None,
) -> list[str]:
    """Write the files under `root` (or only `paths`, relative to it) to `archive`.

    Returns the member names written, sorted.
    """
    root_path = Path(root)
    if paths is None:
        paths = [p.relative_to(root_path).as_posix() for p in root_path.rglob("*")]
    names = sorted(paths)
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in names:
            source = root_path / name
            info = zipfile.ZipInfo.from_file(source, arcname=name)
            if source.is_dir():
                zf.writestr(info, b"")
            else:
                zf.writestr(info, source.read_bytes(), compress_type=zipfile.ZIP_DEFLATED)
    return names


def extract_all(
    archive: str | os.PathLike[str], dest: str | os.PathLike[str], *, overwrite: bool = False
) -> list[str]:
    """Extract every entry of `archive` into the directory `dest`.

    File modes stored in the archive are restored (without setuid/setgid).
    An existing file is only replaced when `overwrite` is true.

    Returns the paths written, in archive order.

    Raises:
        ArchiveError: the archive is unreadable, or a file exists and
            `overwrite` is false.
    """
    dest = os.fspath(dest)
    os.makedirs(dest, exist_ok=True)
    written: list[str] = []
    with _open(archive) as zf:
        for info in zf.infolist():
            target = os.path.join(dest, info.filename)
            if info.is_dir():
                os.makedirs(target, exist_ok=True)
                os.chmod(target, _mode_of(info))
                continue
            if os.path.exists(target) and not overwrite:
                raise ArchiveError(f"{target} exists; pass overwrite=True to replace it")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with zf.open(info) as source, open(target, "wb") as out:
                while chunk := source.read(64 * 1024):
                    out.write(chunk)
            os.chmod(target, _mode_of(info))
            written.append(target)
    return written
