"""An agent's registry packages (`agent.yaml` `packages`), prepared on the host.

Builds have no registry access (docs/architecture.md), so the builder fetches what an
agent names, pinned, before its Dockerfile runs, and puts it into the agent's
build context under `packages/<kind>/`:

    packages/pypi/   the wheels of every `pypi` pin and of their dependencies, for
                     CPython 3.11 on x86_64 manylinux (the runtime's interpreter,
                     /opt/ssebench/bin/python3.11), pip's own wheel, and
                     `requirements.txt` listing the pins. The Dockerfile installs them
                     with `pip install --no-index --find-links`.
    packages/npm/    `node_modules/` as `npm install` made it on the host for linux/x64
                     (glibc), optional platform dependencies included, no install
                     script run (`_npm_packages.py`).

One function per kind (`PREPARERS`) behind one dispatcher (`prepare_packages`).
Each kind's result is cached under `<cache>/agent-packages/<kind>-<key>/`, the key
a digest of the pins and of how they are prepared; its key goes into the agent
stage's inputs digest, so a changed pin rebuilds the agent's image and an
unchanged one reuses it without a build. A folder unused for 30 days is removed
by the next preparation.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

import docker.utils.build
from ssebench.backends.docker._cache import cache_root
from ssebench.backends.docker._layers import _normalized
from ssebench.backends.docker._wheelhouse import PYTHON_VERSION, find_uv
from ssebench.spec import Agent, ImageUnavailableError

PACKAGES_IN_CONTEXT: Final = "packages"
"""The folder of an agent's build context that holds its prepared packages, one folder a kind."""

PIP_VERSION: Final = "25.3"
"""The pip that downloads on the host and whose wheel installs inside the build."""

PYPI_PLATFORMS: Final = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
)
"""Wheel platforms the runtime's interpreter runs (glibc 2.36 bundled); pip takes them literally."""

REQUIREMENTS: Final = "requirements.txt"
"""The pins, one a line, in `packages/pypi/`: what the agent's Dockerfile installs."""

RECIPE: Final = "1"
"""Bump when a preparation below changes, so every cached folder is redone."""

UNUSED_FOR: Final = 30 * 24 * 3600.0
"""Seconds a prepared folder may go unused before a new preparation removes it: agents
keep their folders while in use (one per agent and kind), and old pins go."""

Say = Callable[[str], None]


@dataclass(frozen=True)
class PreparedKind:
    """One kind's packages, ready to go into the build context."""

    kind: str
    folder: Path
    key: str
    """Digest of the pins and the preparation: part of the agent image's identity."""


Preparer = Callable[[Sequence[str], Say], PreparedKind]


def _cached(kind: str, key: str, say: Say, fill: Callable[[Path], None]) -> PreparedKind:
    """`<cache>/agent-packages/<kind>-<key>/files`, made by `fill(folder)` unless complete."""
    root = cache_root() / "agent-packages"
    entry = root / f"{kind}-{key[:32]}"
    if (entry / "complete").is_file():
        say(f"{kind} packages: reusing {entry}")
        os.utime(entry)  # used now: kept by _remove_unused
        return PreparedKind(kind, entry / "files", key)
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{kind}-{key[:32]}.", dir=root))
    try:
        fill(work / "files")
        (work / "complete").write_text(key + "\n")
        if not (entry / "complete").is_file():
            shutil.rmtree(entry, ignore_errors=True)
            work.rename(entry)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _remove_unused(root, keep=entry, say=say)
    return PreparedKind(kind, entry / "files", key)


def _remove_unused(root: Path, keep: Path, say: Say) -> None:
    """Remove the prepared folders (of any kind) unused for `UNUSED_FOR` seconds."""
    now = time.time()
    for entry in root.iterdir():
        # Work folders (".kind-key.xxx") too: one this old was left by a process that died.
        if entry == keep or not entry.is_dir():
            continue
        with contextlib.suppress(FileNotFoundError):
            if now - entry.stat().st_mtime > UNUSED_FOR:
                say(f"agent packages: removing {entry}, unused for 30 days")
                shutil.rmtree(entry, ignore_errors=True)


def prepare_pypi(pins: Sequence[str], say: Say) -> PreparedKind:
    """Download the wheels of `pins` and their dependencies (and pip's) for the runtime.

    Runs `pip download --only-binary=:all:` (pip `PIP_VERSION`, through `uv tool
    run`) for CPython `PYTHON_VERSION` on `PYPI_PLATFORMS`; writes `requirements.txt`.

    Raises:
        ImageUnavailableError: uv is missing or the download failed; the message
            carries the end of pip's output.
    """
    key = hashlib.sha256(
        "\0".join([RECIPE, PIP_VERSION, PYTHON_VERSION, *PYPI_PLATFORMS, *sorted(pins)]).encode()
    ).hexdigest()

    def fill(folder: Path) -> None:
        say(f"pypi packages: downloading {', '.join(pins)} and their dependencies")
        platforms = [arg for platform in PYPI_PLATFORMS for arg in ("--platform", platform)]
        argv = [
            *(find_uv(), "tool", "run", "--from", f"pip=={PIP_VERSION}", "pip", "download"),
            *("--only-binary=:all:", "--python-version", PYTHON_VERSION),
            *("--implementation", "cp", *platforms, "--disable-pip-version-check"),
            *("--dest", str(folder), *pins, f"pip=={PIP_VERSION}"),
        ]
        env = {**os.environ, "UV_PYTHON_DOWNLOADS": "automatic"}
        env.pop("VIRTUAL_ENV", None)
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise ImageUnavailableError(f"cannot run uv to download PyPI packages: {exc}") from exc
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise ImageUnavailableError(
                f"downloading the PyPI packages {', '.join(pins)} failed "
                f"(pip exited {done.returncode}):\n{tail}"
            )
        (folder / REQUIREMENTS).write_text("".join(f"{pin}\n" for pin in pins))

    return _cached("pypi", key, say, fill)


def _prepare_npm(pins: Sequence[str], say: Say) -> PreparedKind:
    # Imported here: _npm_packages builds on this module's _cached and PreparedKind.
    from ssebench.backends.docker._npm_packages import prepare_npm

    return prepare_npm(pins, say)


PREPARERS: Final[Mapping[str, Preparer]] = {"pypi": prepare_pypi, "npm": _prepare_npm}
"""One preparer a kind of `AgentPackages`, by the field's name."""


def prepare_packages(agent: Agent, say: Say) -> list[PreparedKind]:
    """Prepare every kind of package `agent.yaml` names (none: an empty list, nothing run).

    Raises:
        ImageUnavailableError: a kind could not be prepared (the message says which).
    """
    prepared = []
    for kind, preparer in PREPARERS.items():
        pins: list[str] = getattr(agent.packages, kind)
        if pins:
            prepared.append(preparer(pins, say))
    return prepared


def packages_inputs(prepared: Sequence[PreparedKind]) -> list[str]:
    """What the prepared packages add to the agent stage's inputs digest."""
    return [f"{item.kind}:{item.key}" for item in prepared]


def agent_context(
    agent: Agent, prepared: Sequence[PreparedKind]
) -> Path | Callable[[], AbstractContextManager[IO[bytes]]]:
    """The agent's build context: its folder, plus `packages/<kind>/` when it has packages.

    With packages it is a tar stream made when a build is sent: the folder's files
    (its .dockerignore applies, as it does to a folder context), then each kind's
    prepared folder; an entry of the agent's own under `packages/<kind>` is left out.
    """
    if not prepared:
        return Path(agent.folder)

    @contextmanager
    def stream() -> Iterator[IO[bytes]]:
        folder = Path(agent.folder)
        ignore = folder / ".dockerignore"
        patterns = ignore.read_text().splitlines() if ignore.is_file() else []
        patterns = [line.strip() for line in patterns if line.strip() and line[0] != "#"]
        owned = {f"{PACKAGES_IN_CONTEXT}/{item.kind}" for item in prepared}
        with tempfile.TemporaryFile() as out:
            with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name in sorted(docker.utils.build.exclude_paths(str(folder), patterns)):
                    if any(name == top or name.startswith(top + "/") for top in owned):
                        continue
                    tar.add(folder / name, arcname=name, recursive=False, filter=_normalized)
                for item in prepared:
                    arcname = f"{PACKAGES_IN_CONTEXT}/{item.kind}"
                    tar.add(item.folder, arcname=arcname, filter=_normalized)
            out.seek(0)
            yield out

    return stream
