"""What a run was made of (`Summary.provenance`), and the digest of its inputs that resume compares.

The digest covers what is known before the run starts: the task's folder and
the agent's folder (their files, byte for byte), the run's settings, and the
installed SSEBench versions. Image IDs are known only once the backend has
prepared the images, so they are recorded beside it (`images_started_from`)
and resume compares them too: an image rebuilt from unchanged folders (a new
base image, say) is a changed input.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from importlib import metadata
from pathlib import Path
from typing import Final

import msgspec

from ssebench.runner._plan import RunPlan
from ssebench.spec import Agent, Images, Provenance, RunConfig, Task
from ssebench.spec.catalog import files_digest

DIGEST_VERSION: Final = "1"
"""Changes when what goes into the digest changes, so old digests never match new ones."""

_SETTINGS_LEFT_OUT: Final = frozenset({"keep", "plugins"})
"""Settings that do not change what a run does to the agent or its grade (a plugin never
changes the grade, so a run is not redone for its plugins)."""


def ssebench_versions() -> dict[str, str]:
    """Every installed SSEBench distribution and its version, by lower-case name, sorted."""
    return dict(_versions())


@functools.cache
def _versions() -> tuple[tuple[str, str], ...]:
    # Installed versions do not change while this process runs; the scan costs milliseconds.
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower().startswith("ssebench-"):
            found.setdefault(name.lower(), dist.version)
    return tuple(sorted(found.items()))


def folder_digest(folder: Path) -> str:
    """A SHA-256 over every file's path and bytes under `folder`, links by their target.

    Links are not followed, so a link out of the folder changes the digest only
    when its target's name changes; other special files count by their kind.

    Raises:
        OSError: a file cannot be read.
    """
    digest = hashlib.sha256()
    for parent, folders, files in os.walk(folder):
        folders.sort()
        folders[:] = [name for name in folders if name != "__pycache__"]
        base = Path(parent)
        for name in sorted(files):
            path = base / name
            digest.update(str(path.relative_to(folder)).encode(errors="surrogateescape") + b"\0")
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                digest.update(b"link\0" + str(path.readlink()).encode(errors="surrogateescape"))
            elif stat.S_ISREG(mode):
                with path.open("rb") as handle:
                    digest.update(hashlib.file_digest(handle, "sha256").digest())
            else:
                digest.update(f"special {stat.S_IFMT(mode)}".encode())
            digest.update(b"\0")
    return digest.hexdigest()


def run_inputs(
    task: Task,
    agent: Agent,
    config: RunConfig,
    *,
    task_digest: str | None = None,
    agent_digest: str | None = None,
) -> str:
    """The digest of what a run is made of, before it starts.

    Args:
        task: the task.
        agent: the agent.
        config: the run's settings.
        task_digest: `folder_digest` of the task's folder, when already known.
        agent_digest: `folder_digest` of the agent's folder, when already known.

    Returns:
        A hex SHA-256.

    Raises:
        OSError: a file of the task or the agent cannot be read.
    """
    settings = {
        name: value
        for name, value in msgspec.to_builtins(config).items()
        if name not in _SETTINGS_LEFT_OUT
    }
    parts = {
        "digest": DIGEST_VERSION,
        "task": task.id,
        "dataset": task.dataset,
        "dataset_version": task.dataset_version,
        "task_files": task_digest or folder_digest(Path(task.folder)),
        "agent": agent.name,
        "agent_version": agent.version,
        "agent_files": agent_digest or folder_digest(Path(agent.folder)),
        "settings": settings,
        "ssebench": ssebench_versions(),
    }
    return hashlib.sha256(msgspec.json.encode(parts, order="sorted")).hexdigest()


def images_started_from(images: Images) -> dict[str, str]:
    """The images a run starts from, by role (`Provenance.images`)."""
    started_from = {"agent": images.agent}
    if images.environment is not None:
        started_from["environment"] = images.environment
    return started_from


def provenance_of(plan: RunPlan, images: Images | None) -> Provenance:
    """The provenance of a planned run.

    Args:
        plan: the run.
        images: what `prepare_images` returned for it, if it returned.

    Raises:
        OSError: a file of the task or the agent cannot be read.
    """
    started_from = images_started_from(images) if images is not None else {}
    return Provenance(
        ssebench=ssebench_versions(),
        agent_version=plan.agent.version,
        dataset=plan.task.dataset,
        dataset_version=plan.task.dataset_version,
        model=plan.config.model,
        mode=plan.config.mode,
        difficulty=plan.config.difficulty,
        images=started_from,
        # A catalog's task is what its manifest lists, whether or not a local copy exists.
        inputs=run_inputs(
            plan.task,
            plan.agent,
            plan.config,
            task_digest=files_digest(plan.case.files) if plan.case is not None else None,
        ),
    )
