"""The runtime's Python packages, prepared on the host from uv.lock (no PyPI inside builds).

The runtime image carries ssebench-daemon, the workspace packages it depends on
(ssebench-spec) and every third-party dependency at the version uv.lock pins.
The host prepares them as two installed trees (site-packages folders for
CPython 3.11 on x86_64 manylinux):

- dependencies: the third-party requirements `uv export --frozen --no-dev
  --package ssebench-daemon` pins, installed with `uv pip install --target
  --require-hashes` for the runtime's platform rather than the host's;
- workspace: the workspace packages that export names (ssebench-daemon,
  ssebench-spec), each built with `uv build --wheel` and installed the same way.

Each tree is cached under `<cache>/runtime-packages/<kind>-<key>/`. The
dependencies' key hashes the exported requirements (the lock, as far as the
daemon is concerned); the workspace key hashes every file that goes into the
wheels (each package's pyproject.toml and src/). Both also hash the target
(Python, platform) and RECIPE. An unchanged key reuses the tree, so an unchanged
rebuild prepares nothing and sends the engine the same build context, which its
cache recognizes. What an install writes about the host (console scripts naming
its interpreter, where a wheel was, when it was installed) is removed, so the same
key gives a byte-identical tree in any checkout and cache folder. A change to the
daemon's source makes a new workspace tree, so the runtime image is rebuilt from
the step that copies it.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import os
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from ssebench.backends.docker._cache import cache_lock, cache_root
from ssebench.spec import ImageUnavailableError, settings
from ssebench.spec.atomic import write_atomically

RUNTIME_PACKAGE: Final = "ssebench-daemon"
"""The workspace package the runtime is built for; its dependencies come with it."""

PYTHON_VERSION: Final = "3.11"
"""The runtime's Python (Debian bookworm's python3.11)."""

PLATFORM: Final = "x86_64-manylinux_2_28"
"""The platform wheels are chosen for (glibc 2.28 or older; the runtime bundles 2.36)."""

RECIPE: Final = "3"
"""Bump when the preparation below changes, so every cached tree is redone."""

CACHE_ENV: Final = settings.CACHE_DIR.name
"""Environment variable naming SSEBench's cache folder on the host."""

KEEP: Final = 3
"""Prepared trees kept in the cache; older ones are removed."""

Say = Callable[[str], None]


@dataclass(frozen=True)
class PackageTree:
    """An installed package tree (what goes into the runtime's dist-packages)."""

    folder: Path
    key: str
    """Hex digest of everything the tree was made from."""

    reused: bool
    """True if the tree came from the cache."""


@dataclass(frozen=True)
class RuntimePackages:
    """The runtime's packages, as two trees the image build copies one after the other.

    The third-party tree changes only with the lock; the workspace tree (our own
    packages) with every change to their source, so such a change rebuilds only
    the steps after the first tree.
    """

    dependencies: PackageTree
    workspace: PackageTree


def find_uv() -> str:
    """The uv executable: on PATH, else where scripts/setup.sh installs it.

    Raises:
        ImageUnavailableError: uv cannot be found.
    """
    found = shutil.which("uv")
    if found:
        return found
    tools = Path(os.environ.get(settings.TOOLS.name) or Path.home() / ".local/share/ssebench")
    candidate = tools / "uv" / "bin" / "uv"
    if candidate.is_file():
        return str(candidate)
    raise ImageUnavailableError(
        "uv is needed to prepare the runtime's packages from uv.lock and is not on PATH: "
        "run scripts/setup.sh"
    )


def _uv(uv: str, home: Path, *args: str) -> str:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    try:
        result = subprocess.run(
            [uv, *args], cwd=home, env=env, capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise ImageUnavailableError(f"cannot run {uv}: {exc}") from exc
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise ImageUnavailableError(
            f"preparing the runtime's packages failed: `uv {' '.join(args[:2])}` exited "
            f"{result.returncode}:\n{tail}"
        )
    return result.stdout


def _package_files(folder: Path) -> Iterator[Path]:
    """The files of a workspace package that go into its wheel, in a stable order."""
    yield folder / "pyproject.toml"
    for path in sorted((folder / "src").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path


def _members(requirements: str, home: Path) -> list[Path]:
    """The workspace packages the export names (its `-e ./packages/...` lines)."""
    folders = []
    for line in requirements.splitlines():
        if line.startswith("-e "):
            folders.append((home / line[3:].strip()).resolve())
    return sorted(folders)


def _key(*parts: str, members: Sequence[Path] = ()) -> str:
    return _files_digest(
        (RECIPE, PYTHON_VERSION, PLATFORM, *parts),
        (
            (str(path.relative_to(member.parent)), path)
            for member in members
            for path in _package_files(member)
        ),
    )


def _files_digest(parts: Iterable[str], files: Iterable[tuple[str, Path]]) -> str:
    """A digest of `parts`, then of each file's name and content."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    for name, path in files:
        digest.update(name.encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _name(member: Path) -> str:
    with (member / "pyproject.toml").open("rb") as stream:
        return str(tomllib.load(stream)["project"]["name"])


def _cached_tree(
    kind: str, key: str, force: bool, say: Say, fill: Callable[[Path, Path], None]
) -> PackageTree:
    """The tree `<cache>/runtime-packages/<kind>-<key>/site-packages`, made by `fill` if needed.

    `fill(work, tree)` installs into `tree`, using `work` for anything else.
    """
    root = cache_root() / "runtime-packages"
    entry = root / f"{kind}-{key[:32]}"
    tree = entry / "site-packages"
    root.mkdir(parents=True, exist_ok=True)
    # One process fills a tree; another waits, then reuses it.
    with cache_lock("packages", entry.name):
        if (entry / "complete").is_file() and not force:
            say(f"packages: reusing the {kind} tree {tree}")
            os.utime(entry)  # most recently used: kept by _prune
            return PackageTree(folder=tree, key=key, reused=True)
        work = Path(tempfile.mkdtemp(prefix=f".{kind}-{key[:32]}.", dir=root))
        try:
            fill(work, work / "site-packages")
            _strip_host_specifics(work / "site-packages")
            (work / "complete").write_text(key + "\n")
            shutil.rmtree(entry, ignore_errors=True)
            work.rename(entry)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    _prune(root, kind, keep=entry)
    return PackageTree(folder=tree, key=key, reused=False)


HOST_SPECIFIC: Final = ("direct_url.json", "uv_cache.json")
"""Files of an installed distribution's .dist-info that describe the host, not the package.

direct_url.json records where on the host a wheel was (our wheels are built in a
temporary folder); uv_cache.json carries a timestamp of that wheel.
"""


def _strip_host_specifics(tree: Path) -> None:
    """Remove whatever an install wrote about the host, so the tree depends on its inputs alone.

    The same inputs must give byte-identical trees in any checkout and cache folder:
    the runtime's build context is made from them, and the engine's cache recognizes
    only an identical context. Removed: console scripts (their shebang names the
    host's interpreter, often inside the checkout's .venv; the runtime runs modules
    with -m), HOST_SPECIFIC files, uv's lock file, and the RECORD rows of everything
    removed (they carry those files' hashes, so the checkout's path).
    """
    shutil.rmtree(tree / "bin", ignore_errors=True)
    (tree / ".lock").unlink(missing_ok=True)  # uv's, while installing
    for info in tree.glob("*.dist-info"):
        for name in HOST_SPECIFIC:
            (info / name).unlink(missing_ok=True)
        record = info / "RECORD"
        if record.is_file():
            rows = record.read_bytes().decode().splitlines(keepends=True)
            kept = [row for row in rows if _recorded_file_exists(tree, row)]
            record.write_bytes("".join(kept).encode())


def _recorded_file_exists(tree: Path, row: str) -> bool:
    """Whether a RECORD row names a file inside `tree` that is there."""
    fields = next(csv.reader([row]), [])
    if not fields or not fields[0]:
        return False
    path = PurePosixPath(fields[0])
    if path.is_absolute() or ".." in path.parts:
        return False
    return (tree / path).is_file()


def prepare_runtime_packages(
    home: Path, *, force: bool = False, say: Say = lambda _line: None
) -> RuntimePackages:
    """The runtime's installed package trees, from the cache when nothing changed.

    Args:
        home: the SSEBench home (the uv workspace root, holding uv.lock).
        force: prepare the trees again even if the cache has them.
        say: receives a line for each thing done.

    Returns:
        The third-party tree and the workspace tree.

    Raises:
        ImageUnavailableError: uv is missing or one of its commands failed.
    """
    uv = find_uv()
    exported = _export(uv, home, force)
    members = _members(exported, home)
    requirements = "".join(
        line + "\n" for line in exported.splitlines() if not line.startswith("-e ")
    )
    install = [
        *("pip", "install", "--python-platform", PLATFORM, "--python-version", PYTHON_VERSION),
        *("--no-deps", "--link-mode", "copy", "--quiet"),
    ]

    def dependencies(work: Path, tree: Path) -> None:
        say("packages: installing the locked third-party requirements")
        (work / "requirements.txt").write_text(requirements)
        locked = ["--require-hashes", "-r", str(work / "requirements.txt")]
        _uv(uv, home, *install, "--target", str(tree), *locked)

    def workspace(work: Path, tree: Path) -> None:
        for member in members:
            say(f"packages: building the wheel of {_name(member)}")
            _uv(uv, home, "build", "--wheel", "--package", _name(member), "-o", str(work))
        wheels = sorted(str(path) for path in work.glob("*.whl"))
        _uv(uv, home, *install, "--target", str(tree), *wheels)

    return RuntimePackages(
        dependencies=_cached_tree("dependencies", _key(requirements), force, say, dependencies),
        workspace=_cached_tree("workspace", _key(members=members), force, say, workspace),
    )


def _export(uv: str, home: Path, force: bool) -> str:
    """`uv export` of the runtime package, kept in the cache under a key of its inputs.

    What uv exports follows from uv.lock and the workspace's pyproject.toml files
    alone (and from uv itself), so while they are unchanged the kept export is
    used instead of running uv on every run.
    """
    tool = Path(uv).stat()
    inputs = [
        home / "uv.lock",
        home / "pyproject.toml",
        *sorted(home.glob("packages/*/pyproject.toml")),
    ]
    key = _files_digest(
        (RECIPE, uv, f"{tool.st_size} {tool.st_mtime_ns}"),
        ((str(path.relative_to(home)), path) for path in inputs),
    )
    kept = cache_root() / "runtime-packages" / "export.txt"
    if not force:
        with contextlib.suppress(OSError):
            first, _, exported = kept.read_text().partition("\n")
            if first == key:
                return exported
    exported = _uv(
        uv, home, "export", "--frozen", "--no-dev", "--no-header", "--package", RUNTIME_PACKAGE
    )
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
        kept.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(kept, f"{key}\n{exported}".encode())
    return exported


def _prune(root: Path, kind: str, keep: Path) -> None:
    """Remove all but the KEEP most recently used trees of a kind (never `keep`)."""
    entries = sorted(
        (p for p in root.glob(f"{kind}-*") if p.is_dir()),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in [e for e in entries if e != keep][KEEP - 1 :]:
        shutil.rmtree(old, ignore_errors=True)
