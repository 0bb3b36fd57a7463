"""Finding the SSEBench home, its agents and its datasets, so every package agrees."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from ssebench.spec import settings
from ssebench.spec._codec import load_yaml_file
from ssebench.spec._errors import TaskConfigError, UserError
from ssebench.spec._task import (
    CONFIG_PATH,
    Agent,
    AgentConfig,
    DatasetConfig,
    Task,
    load_task_config,
    validate_task_id,
)
from ssebench.spec._task_check import TaskCheck, task_findings

HOME_ENV: Final = settings.HOME.name
"""Environment variable that names the home explicitly."""

AGENT_PATH_ENV: Final = settings.AGENT_PATH.name
"""Extra folders holding agents, separated like PATH."""

DEFAULT_DATASET: Final = "demo"
"""The dataset `--local` defaults to, under `<home>/datasets/`."""


def _is_home(folder: Path) -> bool:
    try:
        with (folder / "pyproject.toml").open("rb") as stream:
            data = tomllib.load(stream)
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return isinstance(data.get("tool", {}).get("ssebench"), dict)


def find_home(start: Path | None = None) -> Path:
    """The SSEBench home: `SSEBENCH_HOME`, else the nearest parent with `[tool.ssebench]`.

    The search starts at `start` (default: the current directory) and, failing
    that, at this package's own location, so an installed checkout works from
    any directory.

    Raises:
        UserError: `SSEBENCH_HOME` names no home, or no home can be found.
    """
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        home = Path(explicit).resolve()
        if not _is_home(home):
            raise UserError(
                f"{HOME_ENV}={explicit} is not an SSEBench home: "
                "its pyproject.toml has no [tool.ssebench] table"
            )
        return home
    for origin in (start or Path.cwd(), Path(__file__)):
        for folder in (origin.resolve(), *origin.resolve().parents):
            if _is_home(folder):
                return folder
    raise UserError(
        f"cannot find the SSEBench home: run inside a checkout of SSEBench or set {HOME_ENV}"
    )


def agent_folders(home: Path) -> list[Path]:
    """Folders that hold agents, in lookup order: `<home>/agents`, then `SSEBENCH_AGENT_PATH`."""
    folders = [home / "agents"]
    extra = os.environ.get(AGENT_PATH_ENV, "")
    folders += [Path(part) for part in extra.split(os.pathsep) if part]
    return folders


def _load_agent(folder: Path) -> Agent:
    config = load_yaml_file(folder / "agent.yaml", AgentConfig)
    if config.name != folder.name:
        raise TaskConfigError(
            f"{folder / 'agent.yaml'}: key 'name' is {config.name!r} but the folder is "
            f"{folder.name!r}; they must match"
        )
    return Agent(
        name=config.name,
        version=config.version,
        uses_model=config.uses_model,
        folder=str(folder),
        packages=config.packages,
    )


def list_agents(home: Path) -> list[Agent]:
    """Every agent on the agent path, first folder winning on a repeated name.

    Raises:
        TaskConfigError: an agent.yaml is invalid.
    """
    found: dict[str, Agent] = {}
    for parent in agent_folders(home):
        if not parent.is_dir():
            continue
        for folder in sorted(parent.iterdir()):
            if (folder / "agent.yaml").is_file() and folder.name not in found:
                found[folder.name] = _load_agent(folder)
    return sorted(found.values(), key=lambda agent: agent.name)


def find_agent(home: Path, name: str) -> Agent:
    """The agent named `name`.

    Raises:
        UserError: no such agent; the message lists the agents there are.
    """
    for parent in agent_folders(home):
        folder = parent / name
        if name and "/" not in name and (folder / "agent.yaml").is_file():
            return _load_agent(folder)
    known = ", ".join(agent.name for agent in list_agents(home)) or "none"
    where = ", ".join(str(folder) for folder in agent_folders(home))
    raise UserError(f"unknown agent {name!r}: known agents are {known} (looked in {where})")


def default_dataset(home: Path) -> Path:
    """The dataset `--local` means when it is not given."""
    return home / "datasets" / DEFAULT_DATASET


def _task_folders(dataset: Path) -> Iterator[Path]:
    for folder in sorted(dataset.iterdir()):
        if (folder / CONFIG_PATH).is_file():
            yield folder


def _task_ids(dataset: Path) -> list[str]:
    """The task IDs of a dataset folder, checked, without reading their configs."""
    seen: dict[str, str] = {}
    for folder in _task_folders(dataset):
        task_id = validate_task_id(folder.name)
        if task_id.lower() in seen:
            raise UserError(
                f"{dataset}: task IDs {seen[task_id.lower()]!r} and {task_id!r} differ only "
                "in case; image names are lower case, so task IDs must be unique ignoring case"
            )
        seen[task_id.lower()] = task_id
    return list(seen.values())


def _dataset_meta(dataset: Path) -> tuple[str, str]:
    if not dataset.is_dir():
        raise UserError(f"dataset folder {dataset} does not exist")
    meta = load_yaml_file(dataset / "dataset.yaml", DatasetConfig)
    return meta.name or dataset.name, meta.version


def _load_task(dataset: Path, task_id: str, name: str, version: str) -> Task:
    folder = dataset / task_id
    config = load_task_config(folder / CONFIG_PATH)
    # Results are filed under the folder's name while the agent is shown the config's
    # `id`: the two must be one name, or a run would say two things about one task.
    if config.id != task_id:
        raise TaskConfigError(
            f"{folder / CONFIG_PATH}: key 'id' is {config.id!r} but the task folder is "
            f"{task_id!r}; they must be the same (rename the folder or change 'id')"
        )
    return Task(
        id=task_id, folder=str(folder), dataset=name, dataset_version=version, config=config
    )


def load_dataset(dataset: Path) -> list[Task]:
    """Every task in a dataset folder, sorted by ID.

    Raises:
        UserError: the folder or its dataset.yaml is missing, a task folder has an
            invalid name, or two task IDs differ only in case.
        TaskConfigError: a task's config.yaml is invalid.
    """
    name, version = _dataset_meta(dataset)
    return [_load_task(dataset, task_id, name, version) for task_id in _task_ids(dataset)]


def check_dataset(dataset: Path) -> list[TaskCheck]:
    """Every task folder of a dataset, sorted, each loaded if it can be and with every problem
    found before a build (`task_findings`): one broken task never hides the next.

    Raises:
        UserError: the folder or its dataset.yaml is missing.
        TaskConfigError: the dataset.yaml is invalid.
    """
    name, version = _dataset_meta(dataset)
    seen: dict[str, str] = {}
    found = []
    for folder in _task_folders(dataset):
        task: Task | None = None
        warnings: list[str] = []
        try:
            validate_task_id(folder.name)
            if folder.name.lower() in seen:
                raise UserError(
                    f"task IDs {seen[folder.name.lower()]!r} and {folder.name!r} differ only "
                    "in case; image names are lower case, so they must be unique ignoring case"
                )
            seen[folder.name.lower()] = folder.name
            task = _load_task(dataset, folder.name, name, version)
        except UserError as exc:
            problems = [str(exc)]
        else:
            problems, warnings = task_findings(task)
        found.append(
            TaskCheck(
                id=folder.name,
                folder=str(folder),
                task=task,
                problems=problems,
                warnings=warnings,
            )
        )
    return found


def find_task(dataset: Path, task_id: str) -> Task:
    """One task of a dataset; only its own config is read, so a broken neighbour does not matter.

    Raises:
        UserError: the ID is invalid or not in the dataset; the message lists the IDs there are.
        TaskConfigError: the task's config.yaml is invalid.
    """
    validate_task_id(task_id)
    name, version = _dataset_meta(dataset)
    task_ids = _task_ids(dataset)
    if task_id not in task_ids:
        known = ", ".join(task_ids) or "none"
        raise UserError(f"unknown task {task_id!r} in {dataset}: tasks there are {known}")
    return _load_task(dataset, task_id, name, version)
