"""A task catalog: a dataset's `manifest.json` and its images lock.

A catalog lets `ssebench run --task ID` find a task without a dataset folder
of its own making: the manifest lists each task's metadata (its config), the
name of its case image (relative to `SSEBENCH_REGISTRY`) and the checksum of
every file of its folder; `images.lock.json` beside it pins case image names
to the registry digests they were published with. Both are written by
`ssebench dataset publish`.

A run of a catalog task gets its case image, in this order: pulled from the
registry (by the lock's digest, else by the dataset's version tag) unless
`--build` is given or `SSEBENCH_REGISTRY` names no registry host; else, or
when the pull fails, built from the local copy of the task folder
(`<catalog folder>/<task id>/`), but only if that copy matches the manifest's
checksums: a changed folder would run a different task under the same name.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

import msgspec

from ssebench.spec import settings
from ssebench.spec._base import Message, UserInput
from ssebench.spec._codec import decode_json, encode_json
from ssebench.spec._errors import DecodeError, UserError
from ssebench.spec._task import Task, TaskConfig, validate_task_id

CATALOG_ENV: Final = settings.CATALOG.name
"""Environment variable naming the catalog's manifest when `--catalog` is not given."""

MANIFEST_FILE: Final = "manifest.json"
"""The manifest's name in a dataset folder; the default catalog is the demo dataset's."""

LOCK_FILE: Final = "images.lock.json"
"""The images lock's name, beside the manifest."""

MANIFEST_FORMAT: Final = 1
"""The manifest's (and the lock's) format; a reader refuses any other."""

TASK_FILES_LABEL: Final = "org.ssebench.task-files"
"""Label of every case image: `files_digest` of the task folder it was built from, so a
pulled image is known to be the manifest's version of the task."""

_SKIPPED: Final = frozenset({"__pycache__"})


class CatalogTask(UserInput, kw_only=True, frozen=True):
    """One task of a manifest."""

    id: str
    case_image: str
    """The case image's name under `SSEBENCH_REGISTRY`: `case/<dataset>/<task>:<version>`."""
    config: TaskConfig
    """The task's `sse/config.yaml`: its metadata."""
    files: dict[str, str]
    """Every file of the task folder by relative path: `sha256:<hex>`, with ` +x` when
    executable, or `link:<target>` for a symbolic link."""


class Manifest(UserInput, kw_only=True, frozen=True):
    """A catalog's `manifest.json`."""

    format: int
    dataset: str
    version: str
    description: str | None = None
    tasks: list[CatalogTask]


class ImagesLock(UserInput, kw_only=True, frozen=True):
    """A catalog's `images.lock.json`: case image name -> the digest it was pushed as."""

    format: int
    images: dict[str, str]


class CaseSource(Message, kw_only=True, frozen=True):
    """Where a run's case image comes from when its task comes from a catalog.

    The backend pulls `pull` (if set) and otherwise, or when that fails, builds
    the case image from the task's folder if it matches `files`.
    """

    catalog: str
    """The manifest's path, for messages."""
    pull: str | None = None
    """The full image to pull, `<registry>/case/...@sha256:…` or `...:<version>`; None: build."""
    files: dict[str, str] = msgspec.field(default_factory=dict)
    """The manifest's checksums of the task folder (`CatalogTask.files`)."""


class Catalog(Message, kw_only=True, frozen=True):
    """A manifest as read, with its path and its lock (empty when there is none)."""

    path: str
    manifest: Manifest
    lock: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def folder(self) -> Path:
        """The folder holding the local copies of the task folders."""
        return Path(self.path).parent


@runtime_checkable
class CasePublisher(Protocol):
    """A backend that can publish case images (`ssebench dataset publish`): an optional ability."""

    def publish_cases(
        self, tasks: Sequence[Task], *, force: bool, say: Callable[[str], None]
    ) -> dict[str, str]:
        """Build each task's case image and push it under `SSEBENCH_REGISTRY`.

        Args:
            tasks: the tasks, from their folders.
            force: replace a tag the registry holds with another image.
            say: receives progress lines.

        Returns:
            Each pushed image's name under the registry prefix (`case_image_path`) and
            the digest the registry holds it as.

        Raises:
            UserError: no registry host is configured, a tag holds another image
                (without `force`), or a build or a push failed.
        """
        ...


def task_files(folder: Path) -> dict[str, str]:
    """The checksum of every file under `folder` (`CatalogTask.files`), `__pycache__` left out.

    Raises:
        UserError: the folder holds something that is neither a file, a folder nor a link.
        OSError: a file cannot be read.
    """
    found: dict[str, str] = {}
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(name for name in dirs if name not in _SKIPPED)
        base = Path(top)
        for name in sorted(files):
            path = base / name
            relative = path.relative_to(folder).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                found[relative] = f"link:{path.readlink()}"
            elif stat.S_ISREG(mode):
                with path.open("rb") as handle:
                    digest = hashlib.file_digest(handle, "sha256").hexdigest()
                found[relative] = f"sha256:{digest}" + (" +x" if mode & 0o100 else "")
            else:
                raise UserError(f"{path}: a task folder holds only files, folders and links")
        # A link to a folder is listed by os.walk as a folder; it is not followed.
        for name in list(dirs):
            path = base / name
            if path.is_symlink():
                found[path.relative_to(folder).as_posix()] = f"link:{path.readlink()}"
                dirs.remove(name)
    return dict(sorted(found.items()))


def files_digest(files: dict[str, str]) -> str:
    """One SHA-256 over a task's checksums (the `TASK_FILES_LABEL` value)."""
    return hashlib.sha256(encode_json(dict(sorted(files.items())))).hexdigest()


def folder_problem(folder: Path, files: dict[str, str]) -> str | None:
    """What differs between a local task folder and its manifest's checksums; None if nothing.

    Returns:
        A short phrase naming up to three differing paths (changed, missing, not in
        the manifest), or that the folder is missing.
    """
    if not folder.is_dir():
        return f"{folder} does not exist"
    try:
        local = task_files(folder)
    except (OSError, UserError) as exc:
        return f"{folder} cannot be read ({exc})"
    differences = [
        *(f"{path} changed" for path in files if path in local and local[path] != files[path]),
        *(f"{path} is missing" for path in files if path not in local),
        *(f"{path} is not in the manifest" for path in local if path not in files),
    ]
    if not differences:
        return None
    more = f" and {len(differences) - 3} more" if len(differences) > 3 else ""
    return f"{folder} differs from the manifest: " + ", ".join(differences[:3]) + more


def case_image_path(task: Task) -> str:
    """A task's case image name under `SSEBENCH_REGISTRY`: `case/<dataset>/<task>:<version>`."""
    return f"case/{task.dataset.lower()}/{task.id.lower()}:{task.dataset_version}"


def _read(path: Path, into: type[Manifest] | type[ImagesLock]) -> Manifest | ImagesLock:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"catalog {path}: cannot read it ({exc.strerror})") from exc
    try:
        found = decode_json(data, into, what=f"catalog {path}")
    except DecodeError as exc:
        raise UserError(" ".join(str(exc).split())) from exc
    if found.format != MANIFEST_FORMAT:
        raise UserError(
            f"catalog {path}: format {found.format} is not one this SSEBench reads "
            f"(it reads {MANIFEST_FORMAT})"
        )
    return found


def load_catalog(path: Path) -> Catalog:
    """Read a manifest and the images lock beside it (if any), and check them.

    Raises:
        UserError: either file cannot be read, is not JSON of its shape, has another
            format, names a task ID twice or an invalid one, a case image other than the
            dataset's name and version give, or the lock pins a digest that is not
            `sha256:<64 hex>`; one line naming the file.
    """
    manifest = _read(path, Manifest)
    assert isinstance(manifest, Manifest)
    seen: set[str] = set()
    for entry in manifest.tasks:
        try:
            validate_task_id(entry.id)
        except UserError as exc:
            raise UserError(f"catalog {path}: {exc}") from exc
        if entry.id.lower() in seen:
            raise UserError(f"catalog {path}: task {entry.id!r} is listed twice")
        seen.add(entry.id.lower())
        if entry.config.id != entry.id:
            raise UserError(
                f"catalog {path}: task {entry.id!r} has a config whose id is {entry.config.id!r}"
            )
        expected = f"case/{manifest.dataset.lower()}/{entry.id.lower()}:{manifest.version}"
        if entry.case_image != expected:
            # The layers above find the case image by this name (docs/architecture.md).
            raise UserError(
                f"catalog {path}: task {entry.id!r} names the case image {entry.case_image!r}; "
                f"the dataset's name and version make it {expected!r}"
            )
    lock: dict[str, str] = {}
    lock_path = path.with_name(LOCK_FILE)
    if lock_path.exists():
        found = _read(lock_path, ImagesLock)
        assert isinstance(found, ImagesLock)
        for name, digest in found.images.items():
            hex_part = digest.removeprefix("sha256:")
            if len(hex_part) != 64 or not digest.startswith("sha256:") or not _is_hex(hex_part):
                raise UserError(
                    f"catalog {lock_path}: {name} is pinned to {digest!r}, not sha256:<64 hex>"
                )
        lock = dict(found.images)
    return Catalog(path=str(path), manifest=manifest, lock=lock)


def _is_hex(text: str) -> bool:
    return all(char in "0123456789abcdef" for char in text)


def catalog_path(given: Path | None, home: Path) -> Path:
    """The manifest a run reads: `--catalog`, else `SSEBENCH_CATALOG`, else the demo dataset's."""
    if given is not None:
        return given
    named = os.environ.get(CATALOG_ENV)
    if named:
        return Path(named)
    return home / "datasets" / "demo" / MANIFEST_FILE


def catalog_task(catalog: Catalog, task_id: str) -> tuple[Task, CatalogTask]:
    """A task of the catalog, as a `Task` whose folder is its local copy, and its entry.

    Raises:
        UserError: the ID is invalid or not in the catalog; the message lists the IDs there are.
    """
    validate_task_id(task_id)
    for entry in catalog.manifest.tasks:
        if entry.id == task_id:
            task = Task(
                id=entry.id,
                folder=str(catalog.folder / entry.id),
                dataset=catalog.manifest.dataset,
                dataset_version=catalog.manifest.version,
                config=entry.config,
            )
            return task, entry
    known = ", ".join(entry.id for entry in catalog.manifest.tasks) or "none"
    raise UserError(f"unknown task {task_id!r} in catalog {catalog.path}: tasks there are {known}")


def registry_host() -> str | None:
    """The registry host `SSEBENCH_REGISTRY` names (`host[:port]/prefix`), or None for a local
    prefix such as the default `ssebench`: then nothing is pulled or pushed."""
    prefix = os.environ.get(settings.REGISTRY.name) or settings.REGISTRY.default
    host = prefix.split("/", 1)[0]
    if "/" in prefix and ("." in host or ":" in host or host == "localhost"):
        return host
    return None


def case_source(catalog: Catalog, entry: CatalogTask, *, build: bool) -> CaseSource:
    """Where a catalog task's case image comes from in this environment.

    Args:
        catalog: the catalog.
        entry: the task's entry.
        build: `--build`: never pull, build from the local folder.

    Returns:
        A source that pulls by the lock's digest, else by the version tag, when a
        registry host is configured and `build` is not set; else one that builds.
    """
    pull = None
    if not build and registry_host() is not None:
        prefix = os.environ.get(settings.REGISTRY.name) or settings.REGISTRY.default
        digest = catalog.lock.get(entry.case_image)
        repository = entry.case_image.rpartition(":")[0]
        pull = f"{prefix}/{repository}@{digest}" if digest else f"{prefix}/{entry.case_image}"
    return CaseSource(catalog=catalog.path, pull=pull, files=entry.files)


def write_catalog(folder: Path, manifest: Manifest, lock: dict[str, str] | None) -> list[Path]:
    """Write `manifest.json` (and, if given, `images.lock.json`) into `folder`, each atomically.

    Returns:
        The files written.

    Raises:
        OSError: a file cannot be written.
    """
    from ssebench.spec.atomic import write_atomically

    # Published files: readable by everyone who runs the catalog.
    written = [folder / MANIFEST_FILE]
    write_atomically(written[0], encode_json(manifest, pretty=True), mode=0o644)
    if lock is not None:
        written.append(folder / LOCK_FILE)
        content = ImagesLock(format=MANIFEST_FORMAT, images=dict(sorted(lock.items())))
        write_atomically(written[1], encode_json(content, pretty=True), mode=0o644)
    return written


def manifest_of(name: str, version: str, description: str | None, tasks: list[Task]) -> Manifest:
    """The manifest of a dataset's tasks, their folders checksummed now.

    Raises:
        UserError: a task folder holds a special file.
        OSError: a file cannot be read.
    """
    return Manifest(
        format=MANIFEST_FORMAT,
        dataset=name,
        version=version,
        description=description,
        tasks=[
            CatalogTask(
                id=task.id,
                case_image=case_image_path(task),
                config=task.config,
                files=task_files(Path(task.folder)),
            )
            for task in tasks
        ],
    )
