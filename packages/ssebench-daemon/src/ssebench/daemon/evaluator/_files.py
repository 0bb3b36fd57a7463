"""Files the evaluator writes in the results directory: `result.json` and `source.tar.gz`.

Every file is written to a fresh temporary name (O_EXCL|O_NOFOLLOW: never
through a link) in the same directory and renamed over its final name, so a
reader sees the old file or the whole new one.

`source.tar.gz` holds the agent's tree, which reaches the host: it is tamed
as docs/integrity.md asks ("What reaches the host is tamed"): every member owned
by root (uid/gid 0, no names), no setuid/setgid/sticky or group/other write
bit, member names relative without `..`, and no link that leads out of the
archived tree, so extracting it (as root, with any tool) creates nothing
outside its folder, nothing privileged, and no way out.
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ssebench.spec import Result, contract, encode_json
from ssebench.spec.atomic import atomic_file

SOURCE_ARCHIVE: Final = "source.tar.gz"
"""The agent's tree, as it was when grading started."""

MAX_ARCHIVED_FILE: Final = 64 * 1024 * 1024
"""Files larger than this (a build product, a sparse file) are left out of the archive."""

MAX_ARCHIVED_TOTAL: Final = 512 * 1024 * 1024
"""Once this much file content is archived, the remaining files are left out."""

ARCHIVED_MODE_MASK: Final = 0o755
"""The permission bits a member keeps: no setuid/setgid/sticky, no group or other write."""


def write_result(results_dir: Path, result: Result) -> Path:
    """Write `result.json` atomically.

    Args:
        results_dir: the results directory.
        result: the grade.

    Returns:
        The file's path.

    Raises:
        OSError: it cannot be written.
    """
    with atomic_file(results_dir / contract.RESULT_FILE) as file:
        file.write(encode_json(result, pretty=True))
    return results_dir / contract.RESULT_FILE


def link_stays_inside(name: str, target: str) -> bool:
    """Whether the link member `name` (`top/…/link`) with `target` resolves inside `top/`.

    A target must be relative: zero or more leading `..` that climb no higher
    than `top/`, then names without `..`. The members above a link are real
    folders, so the climb is exact; what follows only descends, through links
    that obey the same rule, so no chain of links leads out either (a lexical
    check alone would not do: with `d -> .`, `d/..` is outside).
    """
    if not target or target.startswith("/"):
        return False
    parts = [part for part in target.split("/") if part not in ("", ".")]
    climbs = 0
    while climbs < len(parts) and parts[climbs] == "..":
        climbs += 1
    depth = name.count("/") - 1  # folders between top/ and the link
    return ".." not in parts[climbs:] and climbs <= depth


def _tamed(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode &= ARCHIVED_MODE_MASK
    return info


def write_source_archive(source: Path, results_dir: Path) -> tuple[Path, list[str]]:
    """Write `source.tar.gz`: the agent's tree under its own name, links kept as links.

    Only directories, symbolic links and regular files owned by the tree's
    owner are archived: a hard link the agent made to someone else's file,
    a device or a FIFO is left out (and named in the returned notes), and so
    are files beyond the size limits (`MAX_ARCHIVED_FILE`, `MAX_ARCHIVED_TOTAL`)
    and links out of the tree (`link_stays_inside`). Every member is owned by
    root with its mode masked by `ARCHIVED_MODE_MASK` (integrity rule: what
    reaches the host is tamed).

    Args:
        source: the agent's working tree.
        results_dir: where the archive goes.

    Returns:
        The archive's path and what was left out.

    Raises:
        OSError: the tree cannot be read or the archive written.
    """
    owner = os.lstat(source).st_uid
    skipped: list[str] = []
    total = 0

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        nonlocal total
        if info.isdir() or (info.issym() and link_stays_inside(info.name, info.linkname)):
            return _tamed(info)
        if (
            info.isreg()
            and info.uid == owner
            and info.size <= MAX_ARCHIVED_FILE
            and total + info.size <= MAX_ARCHIVED_TOTAL
        ):
            total += info.size
            return _tamed(info)
        skipped.append(info.name)
        return None

    # Member names are this top folder and the names os.scandir gives below it: relative,
    # never `.` or `..`, never through a link (links are not entered).
    top = source.name if source.name not in ("", ".", "..") else "source"
    with (
        atomic_file(results_dir / SOURCE_ARCHIVE) as file,
        tarfile.open(fileobj=file, mode="w:gz", compresslevel=6) as tar,
    ):
        _add_tree(tar, source, top, keep)
    return results_dir / SOURCE_ARCHIVE, skipped


def _add_tree(
    tar: tarfile.TarFile,
    root: Path,
    arcname: str,
    keep: Callable[[tarfile.TarInfo], tarfile.TarInfo | None],
) -> None:
    """Add `root` recursively without following links (os.scandir, lstat only)."""
    stack: list[tuple[str, str]] = [(str(root), arcname)]
    while stack:
        path, name = stack.pop()
        info = tar.gettarinfo(path, arcname=name)
        member = keep(info)
        if member is None:
            continue
        if member.isreg():
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as data:
                if not stat.S_ISREG(os.fstat(data.fileno()).st_mode):
                    continue
                tar.addfile(member, data)
            continue
        tar.addfile(member)
        if member.isdir():
            with os.scandir(path) as entries:
                children = sorted(entries, key=lambda entry: entry.name, reverse=True)
            stack.extend((child.path, f"{name}/{child.name}") for child in children)
