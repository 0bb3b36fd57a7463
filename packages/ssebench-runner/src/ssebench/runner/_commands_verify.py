"""`ssebench dataset verify`: each task's reference and dummy runs, on the evaluation engine."""

from __future__ import annotations

import signal
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

import click
import msgspec
import typer

from ssebench.runner._commands_dataset import (
    LOCAL_HELP,
    dataset_folder,
    validate_dataset,
)
from ssebench.runner._commands_scan import TaskScan, scan_images
from ssebench.runner._console import PROGRAM, fail
from ssebench.runner._eval_display import EvalDisplay
from ssebench.runner._eval_plan import (
    EVALS_ROOT,
    EvalOptions,
    EvalPlan,
    Skipped,
    eval_folder_shown,
    plan_evaluation,
    what_to_run,
)
from ssebench.runner._evaluate import EvalResult, Evaluator, Finished, Progress
from ssebench.runner._lifecycle import said, utc_now
from ssebench.runner._signals import SecondSignal, StopOnSignal, signal_name
from ssebench.runner._verify import VERIFY_AGENTS, TaskVerification, unrun_task, verify_task
from ssebench.spec import (
    BACKEND_ENV,
    DEFAULT_BACKEND,
    Backend,
    SSEBenchError,
    Summary,
    UserError,
    contract,
    encode_json,
    get_backend,
)
from ssebench.spec.terminal import terminal_safe


def verify_command(
    local: Annotated[
        Path | None,
        typer.Option("--local", metavar="DIR", help=LOCAL_HELP, show_default=False),
    ] = None,
    tasks: Annotated[
        str | None,
        typer.Option("--tasks", metavar="IDS", help="Comma-separated task IDs. Default: all."),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("-j", "--concurrency", help="Runs in flight at once.")
    ] = 1,
    backend: Annotated[
        str,
        typer.Option("--backend", envvar=BACKEND_ENV, help="The container platform to run on."),
    ] = DEFAULT_BACKEND,
    check_timeout: Annotated[
        int,
        typer.Option("--check-timeout", help="Seconds each check may run."),
    ] = contract.DEFAULT_CHECK_TIMEOUT,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print each task's verdict as JSON on stdout.")
    ] = False,
) -> None:
    """Check that each task grades as it should, by running its reference and dummy agents.

    Its reference patch must pass every check, and the unchanged project (the
    dummy agent) must fail with every PoC triggering; then the agent images the
    runs used are scanned as `ssebench dataset scan` does.

    The runs are an evaluation (reference and dummy over the tasks), recorded
    under results/ and evals/ like `ssebench eval`'s, so running it again
    reruns only what changed. A task that fails this, or that `dataset
    validate` finds broken, is reported broken; exit status 1 when any is.
    """
    try:
        if concurrency < 1:
            raise UserError(f"invalid concurrency {concurrency}: use 1 or more")
        dataset = dataset_folder(local).absolute()
        checked = {task.id: task for task in validate_dataset(dataset)}
        chosen_ids = _chosen(tasks, list(checked), dataset)
        verdicts = {
            task_id: unrun_task(task_id, checked[task_id].problems)
            for task_id in chosen_ids
            if checked[task_id].problems
        }
        runnable = [task_id for task_id in chosen_ids if task_id not in verdicts]
        plan: EvalPlan | None = None
        if runnable:
            plan = plan_evaluation(
                EvalOptions(
                    tasks=[",".join(runnable)],
                    agents=VERIFY_AGENTS,
                    backend=backend,
                    local=dataset,
                    check_timeout=check_timeout,
                ),
                results_root=Path(contract.HOST_RESULTS_ROOT),
                evals_root=EVALS_ROOT,
                now=utc_now(),
            )
            platform = get_backend(backend)
            if not platform.builds_images:
                raise UserError(f"backend {backend!r} cannot build images; use one that builds")
            pending, skipped = what_to_run(plan, platform.prepare_images)
    except (SSEBenchError, OSError) as exc:
        fail(said(exc))
    if plan is not None:
        display = EvalDisplay(total=len(plan.record.slots), skipped=len(skipped))
        display.console.print(
            f"verifying {len(runnable)} task(s): {len(pending)} runs to make, "
            f"{len(skipped)} unchanged since {eval_folder_shown(plan.folder)}",
            markup=False,
        )
        scans = _Scans(
            platform,
            plan,
            skipped,
            workers=concurrency,
            say=lambda line: display.console.print(line, markup=False, highlight=False),
        )

        def on_progress(progress: Progress, done: Finished | None) -> None:
            display.update(progress, done)
            if done is not None:
                scans.finished(done)

        evaluator = Evaluator(platform, concurrency=concurrency, on_progress=on_progress)
        try:
            with display.shown(), StopOnSignal(evaluator.stop):
                result = evaluator.run(plan, pending, skipped)
        except SecondSignal as interrupt:
            fail(f"ended by {interrupt}", interrupt.exit_status)
        except KeyboardInterrupt:
            fail("interrupted", 128 + signal.SIGINT)
        except OSError as exc:
            fail(said(exc))
        if result.stopped_by is not None:
            fail(f"stopped by {signal_name(result.stopped_by)}", 128 + result.stopped_by)
        verdicts.update(_verdicts(plan, result))
        for task_id, scanned in scans.results().items():
            verdicts[task_id] = _with_scan(verdicts[task_id], scanned)
    ordered = [verdicts[task_id] for task_id in chosen_ids]
    if json_output:
        click.echo(encode_json(ordered, pretty=True).decode(), nl=False)
    else:
        _print_table(dataset, ordered)
    broken = [verdict for verdict in ordered if not verdict.sound]
    for verdict in broken:
        for problem in verdict.problems:
            click.echo(terminal_safe(f"{PROGRAM}: task {verdict.id}: {problem}"), err=True)
    if broken:
        raise typer.Exit(1)


def _chosen(tasks: str | None, known: list[str], dataset: Path) -> list[str]:
    if tasks is None:
        if not known:
            raise UserError(f"dataset {dataset} has no task")
        return known
    chosen: list[str] = []
    for name in (part.strip() for part in tasks.split(",")):
        if not name:
            raise UserError(f"empty name in --tasks {tasks!r}: give a comma-separated list")
        if name not in known:
            raise UserError(
                f"unknown task {name!r} in {dataset}: tasks there are {', '.join(known) or 'none'}"
            )
        if name not in chosen:
            chosen.append(name)
    return chosen


def _verdicts(plan: EvalPlan, result: EvalResult) -> dict[str, TaskVerification]:
    runs: dict[str, dict[str, tuple[Summary | None, str | None]]] = {}
    for cell in result.skipped:
        slot = plan.record.slots[cell.index]
        runs.setdefault(slot.task, {})[slot.agent] = (cell.summary, None)
    for done in result.finished:
        runs.setdefault(done.slot.task, {})[done.slot.agent] = (done.summary, done.error)
    return {
        task_id: verify_task(task, runs.get(task_id, {})) for task_id, task in plan.tasks.items()
    }


class _Scans:
    """Scans a task's agent images as soon as its last run is over, N tasks at a time, while
    the other tasks' runs go on."""

    def __init__(
        self,
        backend: Backend[Any],
        plan: EvalPlan,
        skipped: list[Skipped],
        workers: int,
        say: Callable[[str], None],
    ) -> None:
        # `say`, not click.echo: while the display is up, sys.stderr goes nowhere (and a
        # scan may outlive it).
        self._say = say
        self._backend = backend
        self._plan = plan
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ssebench-scan")
        # With -j 1 one thing runs at a time: the scans wait for the last run.
        self._overlap = workers > 1
        self._lock = threading.Lock()
        self._left = Counter(slot.task for slot in plan.record.slots)
        self._images: dict[str, list[str]] = {task_id: [] for task_id in plan.tasks}
        self._started: dict[str, list[Future[TaskScan]]] = {}
        for cell in skipped:
            self._add(plan.record.slots[cell.index].task, cell.summary)

    def finished(self, done: Finished) -> None:
        """Count a finished run; scan its task once none of the task's runs is left, beside
        the runs still going when more than one thing may run at once (`-j N`, N > 1)."""
        self._add(done.slot.task, done.summary)

    def _add(self, task_id: str, summary: Summary | None) -> None:
        with self._lock:
            image = (
                summary.provenance.images.get("agent") if summary and summary.provenance else None
            )
            if image and image not in self._images[task_id]:
                self._images[task_id].append(image)
            self._left[task_id] -= 1
            ready = self._left[task_id] == 0
        if ready and self._overlap:
            self._start(task_id)

    def _start(self, task_id: str) -> None:
        # One scan an image, not a task: the last task's images are scanned side by side
        # instead of one after the other while nothing else is left to run.
        with self._lock:
            if task_id not in self._started:
                self._started[task_id] = [
                    self._pool.submit(
                        scan_images,
                        self._backend,
                        self._plan.tasks[task_id],
                        [image],
                        self._say,
                    )
                    for image in self._images[task_id]
                ]

    def results(self) -> dict[str, TaskScan]:
        """Every task's scan (those not started yet start now), waited for."""
        for task_id in self._plan.tasks:
            self._start(task_id)
        try:
            return {
                task_id: _merged(task_id, [future.result() for future in futures])
                for task_id, futures in self._started.items()
            }
        finally:
            self._pool.shutdown()


def _merged(task_id: str, scans: list[TaskScan]) -> TaskScan:
    """A task's scan from the scans of its images."""
    return TaskScan(
        id=task_id,
        images=[image for scan in scans for image in scan.images],
        findings=[finding for scan in scans for finding in scan.findings],
        problems=[problem for scan in scans for problem in scan.problems],
    )


def _with_scan(verdict: TaskVerification, scanned: TaskScan) -> TaskVerification:
    """The verdict with `dataset scan`'s findings in the task's agent images added."""
    problems = [
        *verdict.problems,
        *(f"leak in {each.image}: {each.path}: {each.what}" for each in scanned.findings),
        *scanned.problems,
    ]
    return msgspec.structs.replace(verdict, problems=problems, sound=not problems)


def _print_table(dataset: Path, verdicts: list[TaskVerification]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{dataset}: dataset verify", title_justify="left")
    for column in ("task", "reference", "dummy", "verdict"):
        table.add_column(column)
    for verdict in verdicts:
        shown = {
            run.agent: f"{run.outcome or 'not recorded'}"
            + (f", PoCs {run.pocs} pass" if run.pocs else "")
            for run in verdict.runs
        }
        table.add_row(
            Text(verdict.id),
            Text(shown.get("reference", "-")),
            Text(shown.get("dummy", "-")),
            Text("sound", style="green")
            if verdict.sound
            else Text(f"broken: {len(verdict.problems)} problem(s), below", style="red"),
        )
    Console().print(table)
