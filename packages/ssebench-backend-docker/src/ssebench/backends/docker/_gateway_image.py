"""The model gateway's image: LiteLLM from its own lock file, offline, with our hooks.

`images/proxy/requirements.lock` pins `litellm[proxy]` and everything it needs
(with hashes). It is kept out of the workspace's lock: litellm pins `rich<14`
and brings hundreds of megabytes that SSEBench itself never imports. The host
installs the lock into a package tree (`uv pip install --target
--require-hashes`, for CPython 3.11 on x86_64 manylinux, cached like the
runtime's trees) and the image copies it: the build reaches no package index,
only Debian's mirror for python3.11.
"""

from __future__ import annotations

import functools
import hashlib
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Final

import docker
from ssebench.backends.docker import _gateway_policy, _gateway_store
from ssebench.backends.docker._build import (
    BuildLine,
    BuiltImage,
    Progress,
    build_layer,
    inputs_digest,
    no_progress,
)
from ssebench.backends.docker._layers import _normalized, local_image_id
from ssebench.backends.docker._wheelhouse import (
    PLATFORM,
    PYTHON_VERSION,
    PackageTree,
    _cached_tree,
    _uv,
    find_uv,
)
from ssebench.spec import base_image, registry

GATEWAY_FOLDER: Final = Path("images") / "proxy"
"""The gateway's Dockerfile, hook and lock file, relative to the home."""

LOCK_FILE: Final = "requirements.lock"
"""The gateway's own lock file, in GATEWAY_FOLDER."""

SHARED_MODULES: Final = {
    "ssebench_gateway_store.py": Path(_gateway_store.__file__),
    "ssebench_gateway_policy.py": Path(_gateway_policy.__file__),
}
"""The workspace's modules the hook imports, by the names they have in the image."""


def gateway_image_name(home: Path) -> str:
    """`<registry>/gateway:<first 12 hex of the lock's digest>`: a new lock, a new image."""
    digest = hashlib.sha256((home / GATEWAY_FOLDER / LOCK_FILE).read_bytes()).hexdigest()
    return f"{registry()}/gateway:{digest[:12]}"


def prepare_gateway_packages(
    home: Path, *, force: bool = False, say: Progress = no_progress
) -> PackageTree:
    """The installed tree of the gateway's lock file, from the cache when it is unchanged.

    Raises:
        ImageUnavailableError: uv is missing or the install failed.
    """
    uv = find_uv()
    lock = (home / GATEWAY_FOLDER / LOCK_FILE).read_text()
    key = hashlib.sha256(f"gateway\0{PYTHON_VERSION}\0{PLATFORM}\0{lock}".encode()).hexdigest()

    def fill(work: Path, tree: Path) -> None:
        say(BuildLine("gateway", "packages: installing the gateway's locked requirements"))
        (work / LOCK_FILE).write_text(lock)
        _uv(
            uv,
            home,
            *("pip", "install", "--python-platform", PLATFORM, "--python-version", PYTHON_VERSION),
            *("--no-deps", "--link-mode", "copy", "--quiet", "--target", str(tree)),
            *("--require-hashes", "-r", str(work / LOCK_FILE)),
        )

    return _cached_tree("gateway", key, force, lambda line: say(BuildLine("gateway", line)), fill)


@contextmanager
def gateway_context(folder: Path, tree: PackageTree) -> Iterator[IO[bytes]]:
    """The build context: the folder's files, the shared modules and the package tree."""
    with tempfile.TemporaryFile() as stream:
        with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(folder.iterdir()):
                if path.name != "requirements.in":
                    tar.add(path, arcname=path.name, filter=_normalized)
            for name, module in SHARED_MODULES.items():
                tar.add(module, arcname=name, filter=_normalized)
            tar.add(tree.folder, arcname="packages", filter=_normalized)
        stream.seek(0)
        yield stream


def build_gateway_image(
    client: docker.DockerClient,
    home: Path,
    *,
    force: bool = False,
    progress: Progress = no_progress,
) -> BuiltImage:
    """Build (or reuse) the gateway's image.

    Raises:
        ImageUnavailableError: the base image is missing, the packages cannot be
            prepared, or the build failed.
        BackendError: the engine cannot be reached.
    """
    base = base_image()
    base_id = local_image_id(client, base, "run `ssebench images bootstrap-base`")
    tree = prepare_gateway_packages(home, force=force, say=progress)
    shared = [hashlib.sha256(module.read_bytes()).hexdigest() for module in SHARED_MODULES.values()]
    return build_layer(
        client,
        layer="gateway",
        tag=gateway_image_name(home),
        context=functools.partial(gateway_context, home / GATEWAY_FOLDER, tree),
        buildargs={"SSEBENCH_BASE_IMAGE": base},
        nocache=force,
        inputs=inputs_digest([base_id, tree.key, *shared], home / GATEWAY_FOLDER),
        progress=progress,
    )
