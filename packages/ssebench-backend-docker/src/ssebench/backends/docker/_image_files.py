"""Files copied out of images, kept by image ID for the next run of the same image.

Copying one file out of an image means creating a container, archiving the
file out of it and removing the container again: most of a tenth of a second,
on every run. An image ID names the image's content, so a file read from an
image of that ID is the same forever, and a copy kept under the ID is as good
as a new one.

The folder is the user's own (0700): what is kept here (a task's reference
patch) is hidden from agents, not from the user who runs them, and each run
directory keeps a copy of it anyway.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path
from typing import Final

from ssebench.backends.docker._cache import cache_root
from ssebench.spec.atomic import write_atomically

KEEP_IMAGES: Final = 64
"""Images whose files are kept; the least recently used beyond these are dropped."""


def image_files_root() -> Path:
    """Where the copies are kept: `<cache>/image-files/`."""
    return cache_root() / "image-files"


class ImageFileCache:
    """Copies of files out of images, one folder per image ID."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else image_files_root()

    def _entry(self, image_id: str, path: str) -> Path:
        folder = image_id.removeprefix("sha256:")
        if not folder or not all(c in "0123456789abcdef" for c in folder):
            raise ValueError(f"not an image ID: {image_id!r}")
        return self.root / folder / hashlib.sha256(path.encode()).hexdigest()

    def read(self, image_id: str, path: str) -> bytes | None:
        """The kept copy of `path` out of image `image_id`, or None."""
        entry = self._entry(image_id, path)
        try:
            data = entry.read_bytes()
        except OSError:
            return None
        with contextlib.suppress(OSError):
            os.utime(entry.parent)  # recently used: kept longest
        return data

    def write(self, image_id: str, path: str, data: bytes) -> None:
        """Keep a copy (best effort: a cache that cannot be written only costs time)."""
        entry = self._entry(image_id, path)
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            entry.parent.mkdir(mode=0o700, exist_ok=True)
            write_atomically(entry, data)
        except OSError:
            return
        self._prune(keep=entry.parent)

    def _prune(self, keep: Path) -> None:
        folders = sorted(
            (p for p in self.root.iterdir() if p.is_dir() and p != keep),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for old in folders[KEEP_IMAGES - 1 :]:
            shutil.rmtree(old, ignore_errors=True)
