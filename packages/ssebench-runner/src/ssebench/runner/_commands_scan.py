"""`ssebench dataset scan`: each task's agent images, searched for its hidden material."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import click
import msgspec
import typer

from ssebench.runner._commands_dataset import LOCAL_HELP, dataset_folder, validate_dataset
from ssebench.runner._console import PROGRAM, fail
from ssebench.runner._lifecycle import said
from ssebench.runner._scan import LeakFinding, scan_task
from ssebench.runner._verify import VERIFY_AGENTS
from ssebench.spec import (
    Backend,
    ImageRequest,
    Message,
    SSEBenchError,
    Task,
    UserError,
    encode_json,
    find_agent,
    find_home,
    find_task,
    get_backend,
)
from ssebench.spec.terminal import terminal_safe


class TaskScan(Message, kw_only=True, frozen=True):
    """One task as `dataset scan --json` prints it."""

    id: str
    images: list[str]
    findings: list[LeakFinding]
    problems: list[str]
    """Why it could not be scanned (a broken task, an image that cannot be built)."""


def _to_stderr(line: str) -> None:
    click.echo(line, err=True)


def scan_images(
    backend: Backend[Any], task: Task, images: list[str], say: Callable[[str], None] = _to_stderr
) -> TaskScan:
    """Scan `task`'s agent images, telling `say` which; what cannot be scanned is a problem,
    not a pass."""
    findings: list[LeakFinding] = []
    problems: list[str] = []
    for image in images:
        say(f"{PROGRAM}: {task.id}: scanning {image} as uid 1000")
        try:
            findings += scan_task(backend, task, image)
        except (SSEBenchError, OSError) as exc:
            problems.append(f"cannot scan {image}: {said(exc)}")
    return TaskScan(id=task.id, images=images, findings=findings, problems=problems)


def scan_dataset_tasks(
    backend: Backend[Any], dataset: Path, task_ids: list[str], agents: list[str]
) -> list[TaskScan]:
    """Build (or find) each task's agent images for `agents` and scan them."""
    home = find_home()
    chosen_agents = [find_agent(home, name) for name in agents]
    results = []
    for task_id in task_ids:
        task = find_task(dataset, task_id)
        images: list[str] = []
        problems: list[str] = []
        for agent in chosen_agents:
            click.echo(f"{PROGRAM}: {task_id}: preparing the {agent.name} image", err=True)
            try:
                request = ImageRequest(mode="sandbox", task=task, agent=agent)
                images.append(backend.prepare_images(request).agent)
            except SSEBenchError as exc:
                problems.append(f"the {agent.name} image cannot be had: {said(exc)}")
        scanned = scan_images(backend, task, images)
        results.append(msgspec.structs.replace(scanned, problems=problems + scanned.problems))
    return results


def print_findings(scans: list[TaskScan]) -> int:
    """One line on stderr for each finding and problem; how many there were."""
    count = 0
    for scan in scans:
        for finding in scan.findings:
            line = (
                f"{PROGRAM}: task {scan.id}: leak in {finding.image}: "
                f"{finding.path}: {finding.what}"
            )
            click.echo(terminal_safe(line), err=True)
            count += 1
        for problem in scan.problems:
            click.echo(terminal_safe(f"{PROGRAM}: task {scan.id}: {problem}"), err=True)
            count += 1
    return count


def scan_command(
    local: Annotated[
        Path | None,
        typer.Option("--local", metavar="DIR", help=LOCAL_HELP, show_default=False),
    ] = None,
    tasks: Annotated[
        str | None,
        typer.Option("--tasks", metavar="IDS", help="Comma-separated task IDs. Default: all."),
    ] = None,
    agents: Annotated[
        str,
        typer.Option("--agents", metavar="NAMES", help="Whose agent images to scan."),
    ] = ",".join(VERIFY_AGENTS),
    json_output: Annotated[
        bool, typer.Option("--json", help="Print each task's findings as JSON on stdout.")
    ] = False,
) -> None:
    """Search each task's agent images, as the agent's user, for its hidden material.

    As uid 1000 nothing may be readable that is a copy of the config, a
    script, the reference patch, a PoC or the hidden tests; no git object of
    the agent's tree and no readable file may hold a line the fix adds. Each
    finding is printed with its path; exit status 1 when there is any.
    """
    try:
        dataset = dataset_folder(local).absolute()
        checked = {task.id: task for task in validate_dataset(dataset)}
        wanted = [part.strip() for part in tasks.split(",")] if tasks else list(checked)
        for name in wanted:
            if name not in checked:
                raise UserError(
                    f"unknown task {name!r} in {dataset}: tasks there are "
                    f"{', '.join(checked) or 'none'}"
                )
            if checked[name].problems:
                raise UserError(f"task {name} is broken (see `ssebench dataset validate`)")
        names = [part.strip() for part in agents.split(",") if part.strip()]
        backend = get_backend("docker")
        scans = scan_dataset_tasks(backend, dataset, wanted, names)
    except (SSEBenchError, OSError) as exc:
        fail(said(exc))
    if json_output:
        click.echo(encode_json(scans, pretty=True).decode(), nl=False)
    else:
        for scan in scans:
            verdict = "clean" if not scan.findings and not scan.problems else "LEAKS"
            click.echo(f"{scan.id}: {verdict} ({len(scan.images)} image(s) scanned)")
    if print_findings(scans):
        raise typer.Exit(1)
