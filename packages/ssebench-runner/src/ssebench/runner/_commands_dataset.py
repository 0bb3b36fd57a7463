"""`ssebench dataset`: task authors' tools (list, validate, new, verify, scan, publish)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import click
import msgspec
import typer

from ssebench.runner._commands_tasks import list_tasks
from ssebench.runner._console import PROGRAM, fail
from ssebench.runner._lifecycle import said
from ssebench.runner._task_skeleton import TOOLCHAINS, new_task
from ssebench.spec import (
    BACKEND_ENV,
    DEFAULT_BACKEND,
    DatasetConfig,
    Message,
    SSEBenchError,
    TaskCheck,
    UserError,
    check_dataset,
    default_dataset,
    encode_json,
    find_home,
    get_backend,
    load_dataset,
    load_yaml_file,
    registry,
)
from ssebench.spec._task_check import folder_path
from ssebench.spec.catalog import CasePublisher, manifest_of, registry_host, write_catalog
from ssebench.spec.terminal import terminal_safe

dataset_app = typer.Typer(
    name="dataset",
    help="Task authors' tools: list, validate, create, verify, scan and publish a dataset's tasks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

dataset_app.command("list")(list_tasks)

LOCAL_HELP = "A dataset folder. Default: the home's datasets/demo."


class TaskValidation(Message, kw_only=True, frozen=True):
    """One task as `ssebench dataset validate --json` prints it."""

    id: str
    folder: str
    problems: list[str]
    """Everything wrong with it before a build, by the task folder's own paths; empty when
    it is valid."""
    warnings: list[str] = msgspec.field(default_factory=list)
    """What may be wrong but leaves it valid (its protected paths: docs/tasks.md)."""


def script_problems(found: TaskCheck) -> list[str]:
    """One line for each script the config names that exists but is not executable (the
    Dockerfile may chmod it, but a task folder should carry the bit that git keeps)."""
    if found.task is None:
        return []
    scripts = found.task.config.scripts
    problems = []
    for key, path in (("build", scripts.build), ("run", scripts.run), ("test", scripts.test)):
        if path is None:
            continue
        where = folder_path(path)
        file = Path(found.folder) / where
        if file.is_file() and not os.access(file, os.X_OK):
            problems.append(f"{where} (scripts.{key}) is not executable: chmod +x it")
    return problems


def validate_dataset(dataset: Path) -> list[TaskValidation]:
    """Every task of a dataset, each with all its problems found without building.

    Raises:
        UserError: the folder or its dataset.yaml is missing.
        TaskConfigError: the dataset.yaml is invalid.
    """
    return [
        TaskValidation(
            id=found.id,
            folder=found.folder,
            problems=[*found.problems, *script_problems(found)],
            warnings=found.warnings,
        )
        for found in check_dataset(dataset)
    ]


def dataset_folder(local: Path | None) -> Path:
    """The dataset `--local` names, or the home's demo dataset."""
    return local if local is not None else default_dataset(find_home())


@dataset_app.command("validate")
def validate_command(
    local: Annotated[
        Path | None,
        typer.Option("--local", metavar="DIR", help=LOCAL_HELP, show_default=False),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of the tasks and their problems.")
    ] = False,
) -> None:
    """Check every task of a dataset without building anything.

    Checks its config's schema, `id` = folder, the files it names exist, its
    scripts are executable, its Dockerfile builds offline, its protected globs
    leave the reference fix alone (and warns where they leave the hidden tests
    open). Every problem of every task is listed, by the task folder's own
    paths; exit status 1 when there is any.
    """
    try:
        dataset = dataset_folder(local)
        tasks = validate_dataset(dataset)
    except SSEBenchError as exc:
        fail(said(exc))
    broken = [task for task in tasks if task.problems]
    if json_output:
        click.echo(encode_json(tasks, pretty=True).decode(), nl=False)
    for task in tasks:
        for warning in task.warnings:
            line = f"{PROGRAM}: task {task.id}: warning: {warning}"
            click.echo(terminal_safe(line), err=True)
        for problem in task.problems:
            click.echo(terminal_safe(f"{PROGRAM}: task {task.id}: {problem}"), err=True)
    if not json_output:
        problems = sum(len(task.problems) for task in broken)
        if broken:
            click.echo(
                f"{dataset}: {len(broken)} of {len(tasks)} tasks broken, {problems} problem(s)"
            )
        else:
            click.echo(f"{dataset}: {len(tasks)} tasks, all valid")
    if broken:
        raise typer.Exit(1)


@dataset_app.command("new")
def new_command(
    task_id: Annotated[str, typer.Argument(metavar="ID", help="The new task's ID (its folder).")],
    language: Annotated[
        str,
        typer.Option(
            "--language",
            metavar="[" + "|".join(sorted(TOOLCHAINS)) + "]",
            help="The project's language: chooses the toolchain the Dockerfile installs.",
        ),
    ],
    local: Annotated[
        Path | None,
        typer.Option("--local", metavar="DIR", help=LOCAL_HELP, show_default=False),
    ] = None,
) -> None:
    """Write a task skeleton that validates, with TODO comments saying what to fill in."""
    try:
        folder = new_task(dataset_folder(local), task_id, language)
    except SSEBenchError as exc:
        fail(said(exc))
    click.echo(str(folder))
    click.echo(
        f"{PROGRAM}: fill in every TODO, then `ssebench dataset validate --local "
        f"{folder.parent}` and `ssebench dataset verify --local {folder.parent} "
        f"--tasks {task_id}`",
        err=True,
    )


class Publication(Message, kw_only=True, frozen=True):
    """What `ssebench dataset publish --json` prints."""

    manifest: str
    lock: str | None
    """The images lock written, or None when nothing was pushed (no registry host)."""
    images: dict[str, str]
    """Each pushed case image's name under the registry prefix and its digest."""


def publish_dataset(
    dataset: Path, backend: str, *, force: bool, say: Callable[[str], None]
) -> Publication:
    """Write a dataset's catalog; with a registry host configured, push its case images first.

    Raises:
        UserError: a task of the dataset is broken (the first problem, one line), the
            backend cannot publish case images, or a build or push failed.
        OSError: a file cannot be read or written.
    """
    for task in validate_dataset(dataset):
        if task.problems:
            raise UserError(
                f"task {task.id}: {task.problems[0]} (a broken task is not published; "
                "`ssebench dataset validate` lists every problem)"
            )
    tasks = load_dataset(dataset)
    meta = load_yaml_file(dataset / "dataset.yaml", DatasetConfig)
    # Checksummed before the images are built, so they pin what was checked.
    manifest = manifest_of(meta.name or dataset.name, meta.version, meta.description, tasks)
    images: dict[str, str] | None = None
    if registry_host() is not None:
        chosen = get_backend(backend)
        if not isinstance(chosen, CasePublisher):
            raise UserError(f"backend {backend!r} cannot publish case images: use --backend docker")
        images = chosen.publish_cases(tasks, force=force, say=say)
    written = write_catalog(dataset, manifest, images)
    return Publication(
        manifest=str(written[0]),
        lock=str(written[1]) if len(written) > 1 else None,
        images=images or {},
    )


@dataset_app.command("publish")
def publish_command(
    local: Annotated[
        Path | None,
        typer.Option("--local", metavar="DIR", help=LOCAL_HELP, show_default=False),
    ] = None,
    backend: Annotated[
        str,
        typer.Option("--backend", envvar=BACKEND_ENV, help="The backend that builds and pushes."),
    ] = DEFAULT_BACKEND,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace a tag the registry holds with another image."),
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print what was written and pushed as JSON.")
    ] = False,
) -> None:
    """Write the dataset's catalog (manifest.json); with a registry, push its case images.

    With SSEBENCH_REGISTRY naming a registry host (host[:port]/prefix), every case
    image is built and pushed first and each one's digest pinned in images.lock.json;
    with a local prefix (the default `ssebench`) nothing is built or pushed.
    """

    def say(line: str) -> None:
        click.echo(terminal_safe(line), err=True)

    try:
        dataset = dataset_folder(local)
        published = publish_dataset(dataset, backend, force=force, say=say)
    except SSEBenchError as exc:
        fail(said(exc))
    except OSError as exc:
        fail(f"cannot publish the dataset: {exc}")
    if published.lock is None:
        say(
            f"{PROGRAM}: SSEBENCH_REGISTRY is {registry()!r}, a local prefix: wrote the "
            "manifest only, nothing was built or pushed"
        )
    if json_output:
        click.echo(encode_json(published, pretty=True).decode(), nl=False)
        return
    for name, digest in published.images.items():
        click.echo(f"{name}  {digest}")
    click.echo(published.manifest)
    if published.lock is not None:
        click.echo(published.lock)
