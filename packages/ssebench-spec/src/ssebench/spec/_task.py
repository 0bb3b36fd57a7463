"""The task format: a task folder, its `sse/config.yaml`, datasets and agents."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, Literal

import msgspec

from ssebench.spec._base import Message, UserInput
from ssebench.spec._codec import load_yaml_file
from ssebench.spec._errors import TaskConfigError, UserError
from ssebench.spec._resources import TaskResources
from ssebench.spec.protected import ProtectedGlobError, ProtectedPaths, protected_paths

Check = Literal["build", "poc", "function_test", "intent_test"]

CHECKS: Final[tuple[Check, ...]] = ("build", "poc", "function_test", "intent_test")
"""Every check, in the order the evaluator runs them."""

TASK_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9]+([._-][A-Za-z0-9]+)*")
"""What a task ID (a task folder's name) may look like."""

TASK_ID_MAX: Final = 128
"""Longest task ID, in characters."""

CONFIG_PATH: Final = Path("sse") / "config.yaml"
"""Where a task keeps its config, relative to the task folder."""


def validate_task_id(task_id: str) -> str:
    """Return `task_id` if it is a valid task ID.

    Raises:
        UserError: it is empty, too long or has characters outside the pattern.
    """
    if len(task_id) > TASK_ID_MAX or TASK_ID_PATTERN.fullmatch(task_id) is None:
        raise UserError(
            f"invalid task ID {task_id!r}: use letters and digits separated by single "
            f"'.', '_' or '-', at most {TASK_ID_MAX} characters"
        )
    return task_id


class TaskDescription(UserInput, kw_only=True, frozen=True):
    """What the agent is told about the bug; at least one field is set."""

    issue: str | None = None
    crash_report: list[str] = msgspec.field(default_factory=list)
    bug_description: str | None = None


class TaskScripts(UserInput, kw_only=True, frozen=True):
    """Paths (relative to /ssebench) of the task's scripts."""

    build: str | None = None
    run: str | None = None
    test: str | None = None


class TaskFiles(UserInput, kw_only=True, frozen=True):
    """Paths (relative to /ssebench) of the task's hidden material."""

    patch: str
    poc: list[str] = msgspec.field(default_factory=list)
    future_test: str | None = None
    # Older tasks carry these two; they are accepted and ignored.
    security_test: str | None = None
    intent_test: str | None = None


class TaskConfig(UserInput, kw_only=True, frozen=True):
    """A task's `sse/config.yaml`."""

    id: str
    project: str
    repository: str
    language: str
    source: str
    task_description: TaskDescription
    scripts: TaskScripts
    files: TaskFiles
    sanitizer: str | None = None
    type: str | None = None
    binary: str | None = None
    trigger_commit: str | None = None
    patch_commit: str | None = None
    reference: list[str] = msgspec.field(default_factory=list)
    originality: str | int | float | bool | None = None
    resources: TaskResources | None = None
    """What the task needs beyond the default limits (`cpus`, `memory`, `pids`)."""
    protected: list[str] | None = None
    """Globs of the files whose changes by the agent are dropped before any check
    (`ssebench.spec.protected`); None: the default of `language`; []: none."""

    def protected_paths(self) -> ProtectedPaths:
        """What this task protects: its own globs or its language's default."""
        return protected_paths(self.protected, self.language)

    def checks(self) -> tuple[Check, ...]:
        """The checks this task has, in grading order."""
        has = {
            "build": self.scripts.build is not None,
            "poc": self.scripts.run is not None and bool(self.files.poc),
            "function_test": self.scripts.test is not None,
            "intent_test": self.scripts.test is not None and self.files.future_test is not None,
        }
        return tuple(check for check in CHECKS if has[check])


def load_task_config(path: Path) -> TaskConfig:
    """Read and check a task's config.yaml.

    Raises:
        TaskConfigError: the file is invalid; the message names the file and key.
    """
    config = load_yaml_file(path, TaskConfig)
    description = config.task_description
    if not (description.issue or description.crash_report or description.bug_description):
        raise TaskConfigError(
            f"{path}: key 'task_description' needs at least one of "
            "'issue', 'crash_report', 'bug_description'"
        )
    if not config.source.startswith("/"):
        raise TaskConfigError(
            f"{path}: key 'source' must be an absolute path, not {config.source!r}"
        )
    try:
        config.protected_paths()
    except ProtectedGlobError as exc:
        raise TaskConfigError(f"{path}: key 'protected': {exc}") from None
    return config


class DatasetConfig(UserInput, kw_only=True, frozen=True):
    """A dataset's `dataset.yaml`."""

    version: str
    name: str | None = None
    description: str | None = None


class Task(Message, kw_only=True, frozen=True):
    """A task found in a dataset: its ID, folder, config and dataset."""

    id: str
    folder: str
    dataset: str
    dataset_version: str
    config: TaskConfig


PYPI_PIN: Final = re.compile(
    r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+"
)
"""A pinned PyPI requirement: `name==version` (extras allowed, nothing else)."""

NPM_PIN: Final = re.compile(r"(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*@[0-9][A-Za-z0-9.+_-]*")
"""A pinned npm package: `name@version` or `@scope/name@version`, an exact version."""


class AgentPackages(UserInput, kw_only=True, frozen=True):
    """What an agent installs from package registries, prepared on the host.

    The builder downloads these (pinned, so builds repeat) into the agent's build
    context; the agent's Dockerfile installs them from there, never from a registry,
    since the build has no registry access.
    """

    pypi: list[str] = msgspec.field(default_factory=list)
    """PyPI requirements, each `name==version`."""
    npm: list[str] = msgspec.field(default_factory=list)
    """npm packages, each `name@version` or `@scope/name@version`."""

    def __post_init__(self) -> None:
        for kind, pins, pattern, form in (
            ("pypi", self.pypi, PYPI_PIN, "name==version"),
            ("npm", self.npm, NPM_PIN, "name@version"),
        ):
            for pin in pins:
                if pattern.fullmatch(pin) is None:
                    # ValueError: msgspec turns it into a ValidationError that names the file.
                    raise ValueError(
                        f"{kind}: {pin!r} is not pinned: write {form} with an exact version"
                    )


class AgentConfig(UserInput, kw_only=True, frozen=True):
    """An agent's `agent.yaml`."""

    name: str
    version: str
    uses_model: bool
    description: str | None = None
    packages: AgentPackages = msgspec.field(default_factory=AgentPackages)
    """Registry packages the builder prepares on the host for the agent's image."""


class Agent(Message, kw_only=True, frozen=True):
    """An agent found on the agent path: its config and folder."""

    name: str
    version: str
    uses_model: bool
    folder: str
    packages: AgentPackages = msgspec.field(default_factory=AgentPackages)
    """Registry packages the builder prepares on the host for the agent's image."""
