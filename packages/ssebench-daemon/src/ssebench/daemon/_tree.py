"""Scratch copies of a project tree: copied with `cp -a`, handed to a user, removed."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from collections.abc import Collection, Mapping
from pathlib import Path

from ssebench.daemon._procs import DEFAULT_PATH, clean_path
from ssebench.daemon._sweep import remove_named


def _cp(environ: Mapping[str, str]) -> str | None:
    return shutil.which("cp", path=clean_path(environ.get("PATH"))) or shutil.which(
        "cp", path=DEFAULT_PATH
    )


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """lchown every entry under `root` (symlinks themselves, never their targets)."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for _, dirnames, filenames, dirfd in os.fwalk(root):
        for name in (*dirnames, *filenames):
            os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)


async def copy_tree(
    src: Path,
    dst: Path,
    *,
    owner: tuple[int, int] | None,
    environ: Mapping[str, str],
    skip: Collection[str] = (),
) -> None:
    """Copy `src` to the new path `dst` preserving modes, times, links and symlinks.

    Args:
        src: the tree to copy (read as root).
        dst: where the copy goes; must not exist.
        owner: (uid, gid) that owns every entry of the copy, or None to keep owners.
        environ: the image's environment (where to find `cp`).
        skip: names left out of the copy at any depth (gone before it is handed to `owner`).

    Raises:
        OSError: the copy failed; the message says why.
    """
    cp = _cp(environ)
    if cp is None:
        await asyncio.to_thread(shutil.copytree, src, dst, symlinks=True)
    else:
        proc = await asyncio.create_subprocess_exec(
            cp,
            "-a",
            "--",
            str(src),
            str(dst),
            env={"PATH": DEFAULT_PATH, "LC_ALL": "C"},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            raise OSError(f"cp -a {src} {dst} failed: {err.decode(errors='replace').strip()}")
    if skip:
        await asyncio.to_thread(remove_named, dst, skip)
    if owner is not None:
        await asyncio.to_thread(_chown_tree, dst, *owner)


async def remove_tree(path: Path) -> None:
    """Remove a tree (symlink-safe: never follows links out of it); a missing one is fine."""

    def remove() -> None:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            shutil.rmtree(path, ignore_errors=True)
            if os.path.lexists(path):
                # A read-only directory inside: make it writable and try again.
                for dirpath, _, _ in os.walk(path):
                    Path(dirpath).chmod(0o700)
                shutil.rmtree(path)
        else:
            path.unlink()

    await asyncio.to_thread(remove)
