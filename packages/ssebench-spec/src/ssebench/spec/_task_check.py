"""What can be known about a task before anything is built: its files and its Dockerfile.

A task folder maps onto the case image's /ssebench as the task format says
(docs/tasks.md): `sse/config.yaml` -> `config.yaml`, `sse/<script>` ->
`scripts/<script>`, every other `sse/<path>` -> `<path>`. The config names its
files by their /ssebench path; a listed file (a PoC, the reference patch, a
script) missing from the task folder is reported here, by the folder's own
path, before an image is built that would only show it missing inside.

Builds have no network and nothing is pulled (docs/architecture.md), so a task
written for the earlier SSEBench, whose Dockerfile starts from the earlier
base images or clones its project from the internet, cannot build as it is:
each such line is named with how to adapt it (docs/tasks.md).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

from ssebench.spec._errors import UserError
from ssebench.spec._task import CONFIG_PATH, Task, TaskConfig

TASK_GUIDE: Final = "docs/tasks.md"
"""The task authors' guide, relative to the home: how to adapt an earlier task."""

BASE_IMAGE_ARG: Final = "SSEBENCH_BASE_IMAGE"
"""The build argument naming the base image every case image starts from."""

_BASE_REFERENCES: Final = frozenset({f"${{{BASE_IMAGE_ARG}}}", f"${BASE_IMAGE_ARG}"})
_FETCH: Final = re.compile(
    r"\b(git\s+(clone|fetch|pull|submodule|ls-remote)|curl|wget)\b.*(\w+://|git@)", re.DOTALL
)
_URL: Final = re.compile(r"^\w+://")


@dataclass(frozen=True, kw_only=True)
class TaskCheck:
    """One task folder of a dataset, loaded or not, with what is wrong with it (stays in
    the process: `ssebench tasks list --json` prints its own listing)."""

    id: str
    folder: str
    task: Task | None
    """None when the config cannot be read (the reason is in `problems`)."""
    problems: list[str]
    warnings: list[str] = field(default_factory=list)
    """What may be wrong but does not stop the task (`protection_problems`)."""


def folder_path(relative: str) -> str:
    """The task folder's own path of a file named (relative to /ssebench) in the config."""
    path = posixpath.normpath(relative)
    if path == "config.yaml":
        return str(CONFIG_PATH)
    if path.startswith("scripts/"):
        return posixpath.join("sse", path.removeprefix("scripts/"))
    return posixpath.join("sse", path)


def _listed_files(config: TaskConfig) -> Iterator[tuple[str, str]]:
    scripts, files = config.scripts, config.files
    for key, path in (
        ("scripts.build", scripts.build),
        ("scripts.run", scripts.run),
        ("scripts.test", scripts.test),
        ("files.patch", files.patch),
        ("files.future_test", files.future_test),
    ):
        if path:
            yield key, path
    for path in files.poc:
        yield "files.poc", path
    for path in config.task_description.crash_report:
        yield "task_description.crash_report", path


def missing_files(folder: Path, config: TaskConfig) -> list[str]:
    """One line for each file the config names that the task folder does not hold."""
    found = []
    for key, path in _listed_files(config):
        where = folder_path(path)
        if where.startswith("sse/../") or not (folder / where).is_file():
            found.append(f"{where} ({key} {path!r}) is missing")
    return found


def _instructions(text: str) -> Iterator[tuple[int, str, str]]:
    """(line number, instruction in upper case, its arguments) of a Dockerfile."""
    start, parts = 0, list[str]()
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not parts and (not stripped or stripped.startswith("#")):
            continue
        if parts and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1])
            continue
        parts.append(stripped)
        words = " ".join(parts).split(None, 1)
        parts = []
        yield start, words[0].upper(), words[1] if len(words) > 1 else ""


class FromLine(NamedTuple):
    """One FROM of a Dockerfile."""

    number: int
    """Its line number."""
    image: str
    """The image as written (build arguments not yet substituted)."""
    stage: str | None
    """Its `AS` name, if any."""


def from_lines(text: str) -> tuple[dict[str, str], list[FromLine]]:
    """What a builder resolves to decide which images a Dockerfile needs: the defaults of
    the ARGs before the first FROM (empty for an ARG without one), and each FROM."""
    defaults: dict[str, str] = {}
    froms: list[FromLine] = []
    for number, instruction, arguments in _instructions(text):
        words = [word for word in arguments.split() if not word.startswith("--")]
        if instruction == "ARG" and words and not froms:
            name, _, value = words[0].partition("=")
            defaults[name] = value.strip("\"'")
        elif instruction == "FROM" and words:
            stage = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
            froms.append(FromLine(number, words[0], stage))
    return defaults, froms


def _cut(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def dockerfile_problems(text: str) -> list[str]:
    """Each line of a case image's Dockerfile that cannot build offline, and how to adapt it.

    A FROM may name `${SSEBENCH_BASE_IMAGE}`, `scratch` or an earlier stage; a RUN
    may not fetch with git, curl or wget, nor an ADD from a URL.
    """
    found = []
    stages: set[str] = set()
    for number, instruction, arguments in _instructions(text):
        words = [word for word in arguments.split() if not word.startswith("--")]
        if instruction == "FROM" and words:
            image = words[0]
            if len(words) >= 3 and words[1].lower() == "as":
                stages.add(words[2].lower())
            if image not in _BASE_REFERENCES and image.lower() not in {"scratch", *stages}:
                found.append(
                    f"Dockerfile line {number}: FROM {_cut(image)} is not the configured base "
                    "image, and SSEBench never pulls: start from it with `ARG "
                    f"{BASE_IMAGE_ARG}` and `FROM ${{{BASE_IMAGE_ARG}}}`, installing the "
                    f"toolchain from the distribution's packages ({TASK_GUIDE})"
                )
        elif instruction == "RUN" and _FETCH.search(arguments):
            found.append(
                f"Dockerfile line {number}: RUN {_cut(arguments)} fetches from the network, "
                "which builds do not have: put the sources in the task folder (the build "
                f"context) and COPY them ({TASK_GUIDE})"
            )
        elif instruction == "ADD" and any(_URL.match(word) for word in words[:-1]):
            found.append(
                f"Dockerfile line {number}: ADD from a URL fetches from the network, which "
                "builds do not have: put the file in the task folder and COPY it "
                f"({TASK_GUIDE})"
            )
    return found


_PATCH_PATH: Final = re.compile(r"^(?:---|\+\+\+) (?:\"[ab]/((?:[^\"\\]|\\.)*)\"|[ab]/(.*?))\t?$")


def patch_paths(text: str) -> list[str]:
    """The paths a unified git diff changes (both sides of a rename), sorted, unique."""
    found: set[str] = set()
    for line in text.splitlines():
        match = _PATCH_PATH.match(line)
        if match is not None:
            quoted, plain = match.groups()
            if quoted is not None:
                # C-style quoting: enough of it for the paths a task's own diff names.
                plain = quoted.encode("latin-1", "backslashreplace").decode("unicode_escape")
                plain = plain.encode("latin-1", "replace").decode("utf-8", "replace")
            found.add(plain)
    return sorted(found)


def _diff_paths(folder: Path, relative: str | None) -> list[str]:
    if relative is None:
        return []
    try:
        return patch_paths((folder / folder_path(relative)).read_text(errors="replace"))
    except OSError:
        return []  # missing_files says so


def protection_problems(task: Task) -> tuple[list[str], list[str]]:
    """What is wrong with a task's protected paths (docs/tasks.md), as (problems, warnings).

    A problem: a glob that cannot be used, or one that covers a file the reference patch
    changes (the reference fix itself would be dropped). A warning: `protected: []`, a
    language without a default and no list, or a path of the hidden tests left
    unprotected (an agent could change or pre-create it).
    """
    config = task.config
    try:
        protected = config.protected_paths()
    except ValueError as exc:
        return [f"{CONFIG_PATH} key 'protected': {exc}"], []
    folder = Path(task.folder)
    problems, warnings = [], []
    for path in _diff_paths(folder, config.files.patch):
        glob = protected.covering(path)
        if glob is not None:
            problems.append(
                f"{CONFIG_PATH} key 'protected': {glob!r} covers {path}, which the reference "
                f"patch changes, so the reference fix would be dropped: narrow the glob"
            )
    if config.protected == []:
        warnings.append(
            f"{CONFIG_PATH} key 'protected' is empty: an agent's change to the tests or their "
            "runner's configuration is graded as it is"
        )
    elif config.protected is None and not protected:
        warnings.append(
            f"{CONFIG_PATH} has no 'protected' key and language {config.language!r} has no "
            f"default: name the tests and test-runner configuration that judge a fix "
            f"({TASK_GUIDE})"
        )
    hidden = _diff_paths(folder, config.files.future_test)
    open_paths = [path for path in hidden if protected.covering(path) is None]
    if open_paths:
        warnings.append(
            f"{CONFIG_PATH} key 'protected' leaves the hidden tests' paths unprotected: "
            f"{', '.join(open_paths)} (an agent could change or pre-create them)"
        )
    return problems, warnings


def task_findings(task: Task) -> tuple[list[str], list[str]]:
    """Everything wrong with a loaded task that shows before a build, as (problems,
    warnings): missing files, protected globs that cannot be used or cover the reference
    fix, Dockerfile lines that cannot build offline; the warnings of
    `protection_problems`."""
    folder = Path(task.folder)
    protection, warnings = protection_problems(task)
    found = missing_files(folder, task.config) + protection
    try:
        text = (folder / "Dockerfile").read_text(errors="replace")
    except OSError as exc:
        found.append(f"Dockerfile cannot be read: {exc.strerror or exc}")
    else:
        found += dockerfile_problems(text)
    return found, warnings


def task_problems(task: Task) -> list[str]:
    """`task_findings`' problems; empty when there is nothing."""
    return task_findings(task)[0]


def check_task_files(task: Task) -> None:
    """Refuse a task whose folder lacks a file its config names (`missing_files`), or
    whose protected globs cover the reference fix (`protection_problems`).

    Raises:
        UserError: one line naming the task and each problem.
    """
    missing = missing_files(Path(task.folder), task.config) + protection_problems(task)[0]
    if missing:
        raise UserError(f"task {task.id} ({task.folder}): " + "; ".join(missing))
