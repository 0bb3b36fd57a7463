"""The base image, bootstrapped offline from Debian packages (debootstrap, then import).

SSEBench never pulls the base image: a machine that reaches only Debian's
mirror can still build every case image.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

import docker
import docker.utils
from ssebench.backends.docker._engine import image_exists
from ssebench.backends.docker._errors import engine_errors
from ssebench.spec import BackendError, UserError, settings

DEFAULT_MIRROR: Final = settings.DEBIAN_MIRROR.default
"""Debian mirror used when SSEBENCH_DEBIAN_MIRROR is unset."""

MIRROR_ENV: Final = settings.DEBIAN_MIRROR.name
"""Environment variable naming the Debian mirror."""

SUITE: Final = "bookworm"
"""The Debian release the base image holds."""

# What Docker's own slim images leave out; keeps the image small and apt keeps
# leaving them out in every layer built on it.
_DPKG_EXCLUDES: Final = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
"""

_SOURCES: Final = """\
Types: deb
URIs: {mirror}
Suites: {suite} {suite}-updates
Components: main

Types: deb
URIs: {security}
Suites: {suite}-security
Components: main
"""

Progress = Callable[[str], None]


def mirror() -> str:
    """The Debian mirror in force."""
    return os.environ.get(MIRROR_ENV) or DEFAULT_MIRROR


def _run(argv: list[str], progress: Progress, what: str) -> None:
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    assert process.stdout is not None
    tail: list[str] = []
    for line in process.stdout:
        progress(line.rstrip())
        tail = [*tail[-19:], line.rstrip()]
    if process.wait() != 0:
        raise BackendError(
            f"{what} failed (exit {process.returncode}); last lines:\n" + "\n".join(tail)
        )


def _slim(rootfs: Path, debian_mirror: str) -> None:
    (rootfs / "etc/dpkg/dpkg.cfg.d").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/dpkg/dpkg.cfg.d/ssebench-slim").write_text(_DPKG_EXCLUDES)
    for folder in ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale"):
        target = rootfs / folder
        if target.is_dir():
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (rootfs / cache).glob("*"):
            if item.is_file():
                item.unlink()
    security = debian_mirror.rstrip("/").removesuffix("/debian") + "/debian-security"
    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    (rootfs / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(
        _SOURCES.format(mirror=debian_mirror, security=security, suite=SUITE)
    )


def bootstrap_base_image(
    client: docker.DockerClient,
    name: str,
    *,
    force: bool = False,
    progress: Progress = lambda _line: None,
) -> bool:
    """Build the base image `name` from Debian packages when it is missing.

    Args:
        client: the engine to import into.
        name: the image name, e.g. `debian:bookworm-slim`.
        force: rebuild even if the image exists.
        progress: receives each line of debootstrap's output.

    Returns:
        True if an image was built, False if it already existed.

    Raises:
        UserError: not root, or debootstrap is not installed.
        BackendError: debootstrap or the import failed.
    """
    if not force and image_exists(client, name):
        return False
    if os.geteuid() != 0:
        raise UserError(f"bootstrapping {name} needs root (debootstrap creates device nodes)")
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise UserError(
            f"image {name} is missing and debootstrap is not installed: "
            "apt-get install debootstrap (or run scripts/setup.sh)"
        )
    debian_mirror = mirror()
    repository, tag = docker.utils.parse_repository_tag(name)
    with tempfile.TemporaryDirectory(prefix="ssebench-base-", dir="/var/tmp") as scratch:
        rootfs = Path(scratch) / "rootfs"
        _run(
            [debootstrap, "--variant=minbase", SUITE, str(rootfs), debian_mirror],
            progress,
            f"debootstrap of {SUITE} from {debian_mirror}",
        )
        _slim(rootfs, debian_mirror)
        archive = Path(scratch) / "rootfs.tar"
        _run(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."],
            progress,
            "packing the root file system",
        )
        progress(f"importing as {name}")
        with engine_errors(f"importing {name} into the Docker engine"):
            client.api.import_image(
                src=str(archive),
                repository=repository,
                tag=tag or "latest",
                changes=['CMD ["bash"]'],
            )
    if not image_exists(client, name):
        raise BackendError(f"the engine accepted the import but has no image {name}")
    return True
