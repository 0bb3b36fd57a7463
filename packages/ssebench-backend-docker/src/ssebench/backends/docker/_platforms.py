"""Which `linux/<arch>` platforms this engine can build for, and the check before a build.

The engine builds natively for its own architecture; any other needs an
emulator registered with the kernel (binfmt_misc, e.g. qemu-user-static). A
build for a platform with neither would fail deep inside the first RUN step
with "exec format error"; checking first gives one clear line instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import docker
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._wheelhouse import PLATFORM as WHEEL_PLATFORM
from ssebench.spec import ImageUnavailableError

BINFMT: Final = Path("/proc/sys/fs/binfmt_misc")
"""Where the kernel lists the interpreters it runs foreign binaries with."""

RUNTIME_ARCHITECTURE: Final = "amd64"
"""The one architecture the runtime's wheels are prepared for (`_wheelhouse.PLATFORM`)."""

_QEMU_ARCH: Final = {
    "aarch64": "arm64",
    "arm": "arm",
    "i386": "386",
    "x86_64": "amd64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
    "mips64el": "mips64le",
}
"""qemu's names of architectures, as OCI platforms name them."""


def architecture(platform: str) -> str:
    """The architecture of `linux/<arch>[/<variant>]`."""
    return platform.split("/")[1]


def native_platform(client: docker.DockerClient) -> str:
    """The engine's own platform, such as `linux/amd64`.

    Raises:
        BackendError: the engine cannot be asked.
    """
    with engine_errors("asking the Docker engine for its platform"):
        version = client.version()
    return f"{version.get('Os', 'linux')}/{version.get('Arch', 'amd64')}"


def emulated_architectures(binfmt: Path = BINFMT) -> set[str]:
    """The architectures the kernel runs through an enabled qemu interpreter."""
    found: set[str] = set()
    try:
        entries = list(binfmt.glob("qemu-*"))
    except OSError:
        return found
    for entry in entries:
        arch = _QEMU_ARCH.get(entry.name.removeprefix("qemu-"))
        try:
            enabled = entry.read_text().startswith("enabled")
        except OSError:
            continue
        if arch is not None and enabled:
            found.add(arch)
    return found


def check_buildable(client: docker.DockerClient, platform: str | None) -> None:
    """Refuse, before anything is built, a platform this machine cannot build for.

    Raises:
        ImageUnavailableError: `platform` is neither the engine's own nor emulated.
        BackendError: the engine cannot be asked.
    """
    if platform is None:
        return
    native = native_platform(client)
    wanted = architecture(platform)
    if wanted != architecture(native) and wanted not in emulated_architectures():
        raise ImageUnavailableError(
            f"this machine ({native}) cannot build images for {platform}: no emulator for "
            f"{wanted} is registered in {BINFMT}; run images published for it with --prebuilt "
            "(`ssebench images push` on a machine of that platform), or install qemu-user-static"
        )
    if wanted != RUNTIME_ARCHITECTURE:
        raise ImageUnavailableError(
            f"cannot build images for {platform}: the runtime's Python packages are prepared "
            f"for linux/{RUNTIME_ARCHITECTURE} only ({WHEEL_PLATFORM}); run images published "
            "for it with --prebuilt"
        )


def matches(image_attrs: dict[str, object], platform: str | None) -> bool:
    """Whether an image (its inspect data) is for `platform` (None: any)."""
    if platform is None:
        return True
    parts = platform.split("/")
    if image_attrs.get("Os") != parts[0] or image_attrs.get("Architecture") != parts[1]:
        return False
    return len(parts) < 3 or image_attrs.get("Variant") in (None, "", parts[2])
