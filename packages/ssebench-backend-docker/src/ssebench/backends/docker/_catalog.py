"""Case images of a task catalog: pulled for a run, or built from a matching folder; published.

A run of a catalog task (`ImageRequest.case`) gets its case image under the
name the layers above it expect (`case_image_name`), in this order:

1. pulled as `case.pull` names it (the images lock's digest, else the version
   tag), and kept only if its `TASK_FILES_LABEL` is the digest of the
   manifest's checksums: a tag that now holds another version of the task is
   a failed pull, not a different task run under the same name;
2. else built from the task's local folder, only if that folder matches the
   manifest's checksums (`folder_problem`); a changed folder is refused in
   one line, naming what differs.

Publishing (`publish_cases`) builds each task's case image and pushes it; its
digest goes into the catalog's images lock.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import docker
from ssebench.backends.docker._build import INPUTS_LABEL, Progress
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._layers import build_case, case_image_name
from ssebench.backends.docker._prepare import pull_exact, split_tag
from ssebench.backends.docker._publish import Say, push_image, push_registry
from ssebench.spec import ImageRequest, ImageUnavailableError, Task
from ssebench.spec.catalog import TASK_FILES_LABEL, CaseSource, files_digest, folder_problem


def _pulled(client: docker.DockerClient, request: ImageRequest, source: str) -> str | None:
    """Pull the catalog's case image and tag it as the run's case image; None on success,
    else why it could not be used."""
    case = request.case
    assert case is not None
    try:
        image = pull_exact(client, source, request.platform)
    except ImageUnavailableError as exc:
        return str(exc)
    found = (image.labels or {}).get(TASK_FILES_LABEL)
    if found != files_digest(case.files):
        return f"it was built from other task files than the catalog lists ({TASK_FILES_LABEL})"
    repository, tag = split_tag(case_image_name(request.task))
    with engine_errors(f"tagging {source}", family=ImageUnavailableError):
        image.tag(repository, tag)
    return None


def provide_case(client: docker.DockerClient, request: ImageRequest, progress: Progress) -> None:
    """Make the case image of a catalog task exist under `case_image_name`, pulled or built.

    Raises:
        ImageUnavailableError: the pull failed (or was not asked for) and the local
            folder is missing or differs from the catalog (one line, nothing built), or
            the build failed.
        BackendError: the engine cannot be reached.
    """
    case: CaseSource | None = request.case
    assert case is not None
    task = request.task
    why = None
    if case.pull is not None:
        why = _pulled(client, request, case.pull)
        if why is None:
            return
    problem = folder_problem(Path(task.folder), case.files)
    if problem is not None:
        pulled = f"cannot pull {case.pull} ({why}), and " if case.pull is not None else ""
        raise ImageUnavailableError(
            f"task {task.id} of catalog {case.catalog}: {pulled}its local folder cannot be "
            f"built from: {problem}"
        )
    if case.pull is not None:
        print(
            f"warning: cannot pull {case.pull} ({why}); building it from {task.folder}, "
            "which matches the catalog",
            file=sys.stderr,
            flush=True,
        )
    build_case(client, task, progress=progress, platform=request.platform)


def publish_cases(
    client: docker.DockerClient,
    tasks: Sequence[Task],
    *,
    force: bool,
    progress: Progress,
    say: Say,
) -> dict[str, str]:
    """Build each task's case image and push it under `SSEBENCH_REGISTRY`.

    Returns:
        Each pushed image's name (without the registry prefix) and its digest.

    Raises:
        UserError: `SSEBENCH_REGISTRY` names no registry host; the registry holds another
            image under a tag and `force` is not set.
        ImageUnavailableError: a build or a push failed.
        BackendError: the engine cannot be reached.
    """
    prefix = push_registry()
    digests = {}
    for task in tasks:
        built = build_case(client, task, progress=progress)
        published = push_image(client, built.tag, force=force, say=say, required=(INPUTS_LABEL,))
        digests[built.tag.removeprefix(prefix + "/")] = published.digest
    return digests
