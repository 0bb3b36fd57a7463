"""ImageFileCache keeps files copied out of images by image ID; DockerBackend reads through it."""

from __future__ import annotations

import stat
from pathlib import Path

import docker
import pytest

from ssebench.backends.docker import DockerBackend
from ssebench.backends.docker._image_files import KEEP_IMAGES, ImageFileCache

IMAGE_A = "sha256:" + "a" * 64
IMAGE_B = "sha256:" + "b" * 64


def test_a_copy_is_read_back_for_the_same_image_and_path_only(tmp_path: Path) -> None:
    cache = ImageFileCache(tmp_path / "files")
    assert cache.read(IMAGE_A, "/ssebench/diffs/patch.diff") is None
    cache.write(IMAGE_A, "/ssebench/diffs/patch.diff", b"patch\n")
    assert cache.read(IMAGE_A, "/ssebench/diffs/patch.diff") == b"patch\n"
    assert cache.read(IMAGE_A, "/ssebench/diffs/test.diff") is None
    assert cache.read(IMAGE_B, "/ssebench/diffs/patch.diff") is None


def test_the_folders_are_private_to_the_user(tmp_path: Path) -> None:
    cache = ImageFileCache(tmp_path / "files")
    cache.write(IMAGE_A, "/x", b"hidden")
    folder = tmp_path / "files" / ("a" * 64)
    for path in (tmp_path / "files", folder):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    (entry,) = folder.iterdir()
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def test_something_that_is_not_an_image_id_is_refused(tmp_path: Path) -> None:
    cache = ImageFileCache(tmp_path / "files")
    with pytest.raises(ValueError, match="not an image ID"):
        cache.write("../../etc", "/x", b"data")
    assert not (tmp_path / "files").exists()


def test_only_the_most_recently_used_images_are_kept(tmp_path: Path) -> None:
    cache = ImageFileCache(tmp_path / "files")
    ids = [f"sha256:{index:064x}" for index in range(KEEP_IMAGES + 3)]
    for image_id in ids:
        cache.write(image_id, "/x", image_id.encode())
    kept = {path.name for path in (tmp_path / "files").iterdir()}
    assert len(kept) == KEEP_IMAGES
    assert ids[-1].removeprefix("sha256:") in kept


@pytest.mark.docker
def test_copy_from_image_serves_a_second_copy_from_the_kept_one(
    docker_client: docker.DockerClient,
    probe_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    backend = DockerBackend()
    backend.copy_from_image(probe_image, "/probe/artifact.txt", tmp_path / "first")
    image_id = str(docker_client.images.get(probe_image).id)
    cache = ImageFileCache()
    assert cache.read(image_id, "/probe/artifact.txt") == (tmp_path / "first").read_bytes()
    # Proof that the kept copy is what the next copy reads: change it, copy again.
    cache.write(image_id, "/probe/artifact.txt", b"kept copy\n")
    backend.copy_from_image(probe_image, "/probe/artifact.txt", tmp_path / "second")
    assert (tmp_path / "second").read_bytes() == b"kept copy\n"
