"""`ssebench eval`: tasks x agents x models x repeats, N runs at a time, resumable."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Final

import click
import typer

from ssebench.runner._commands_report import MARKDOWN_FILE
from ssebench.runner._commands_run import PluginOption, PrebuiltOption, ToolLayerOption
from ssebench.runner._console import fail
from ssebench.runner._eval_display import EvalDisplay
from ssebench.runner._eval_plan import (
    EVALS_ROOT,
    EvalOptions,
    EvalPlan,
    Pending,
    Skipped,
    eval_folder_shown,
    plan_evaluation,
    read_record,
    resume_plan,
    what_to_run,
    with_images,
)
from ssebench.runner._evaluate import EvalResult, Evaluator
from ssebench.runner._lifecycle import said, utc_now
from ssebench.runner._options import (
    EGRESS_ENV,
    NO_MODEL,
    OFFERED_MODES,
    check_image_source,
)
from ssebench.runner._orphans import reap_own_orphans
from ssebench.runner._report import build_report
from ssebench.runner._report_html import rate_text
from ssebench.runner._report_markdown import render_markdown
from ssebench.runner._signals import SecondSignal, StopOnSignal, signal_name
from ssebench.spec import (
    BACKEND_ENV,
    DEFAULT_BACKEND,
    EvalRecord,
    SSEBenchError,
    UserError,
    contract,
    encode_json,
    get_backend,
)

SKIPPED_SHOWN: Final = 20
"""Skipped runs listed one per line; beyond this many, only their number."""


def eval_command(
    tasks: Annotated[
        str | None,
        typer.Option("--tasks", metavar="IDS", help="Comma-separated task IDs. Default: all."),
    ] = None,
    agents: Annotated[
        str | None,
        typer.Option(
            "--agents", metavar="NAMES", help="Comma-separated agents.", show_default=False
        ),
    ] = None,
    models: Annotated[
        str | None,
        typer.Option(
            "--models",
            metavar="NAMES",
            help=f"Comma-separated models of models.yaml ({NO_MODEL!r}: no model).",
            show_default=False,
        ),
    ] = None,
    local: Annotated[
        Path | None,
        typer.Option("--local", metavar="DIR", help="A dataset folder. Default: the home's demo."),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", metavar="[" + "|".join(OFFERED_MODES) + "]", help="How to run."),
    ] = None,
    backend: Annotated[
        str,
        typer.Option("--backend", envvar=BACKEND_ENV, help="The container platform to run on."),
    ] = DEFAULT_BACKEND,
    difficulty: Annotated[
        int | None, typer.Option("--difficulty", help="0-4 (default 2).", show_default=False)
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            "--repeat", help="Runs of each task x agent x model (default 1).", show_default=False
        ),
    ] = None,
    timeout: Annotated[
        int | None,
        typer.Option(
            "--timeout",
            help=f"Seconds the agent may run (default {contract.DEFAULT_AGENT_TIMEOUT}).",
            show_default=False,
        ),
    ] = None,
    check_timeout: Annotated[
        int | None,
        typer.Option(
            "--check-timeout", help="Seconds each check may run (default 1800).", show_default=False
        ),
    ] = None,
    egress: Annotated[
        str | None,
        typer.Option(
            "--egress",
            envvar=EGRESS_ENV,
            metavar="[restricted|open]",
            help="restricted (default): the model proxy only; open: also the internet.",
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("-j", "--concurrency", help="Runs in flight at once.")
    ] = 1,
    retries: Annotated[
        int, typer.Option("--retries", help="More attempts for a run that ends in infra_error.")
    ] = 1,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            metavar="DIR",
            help="Go on with the evaluation in DIR, with the settings its eval.json holds.",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the evaluation's report as JSON on stdout.")
    ] = False,
    prebuilt: PrebuiltOption = False,
    tool_layer: ToolLayerOption = None,
    plugin: PluginOption = None,
) -> None:
    """Run every task x agent x model x repeat, N at a time, and record each run.

    Each run is recorded as `ssebench run` records it, under results/; the
    evaluation's folder (evals/<id>/, named after its settings) holds eval.json
    and its reports. The same command again, or --resume DIR, skips every run
    whose inputs have not changed and which has an outcome, and reruns
    infra_error and stopped runs. Ctrl-C stops the runs in flight and records them; a
    second Ctrl-C ends at once.
    """
    try:
        if concurrency < 1:
            raise UserError(f"invalid concurrency {concurrency}: use 1 or more")
        if retries < 0:
            raise UserError(f"invalid retries {retries}: use 0 or more")
        if resume is not None:
            given = [
                name
                for name, value in (
                    ("--tasks", tasks),
                    ("--agents", agents),
                    ("--models", models),
                    ("--local", local),
                    ("--mode", mode),
                    ("--difficulty", difficulty),
                    ("--repeat", repeat),
                    ("--timeout", timeout),
                    ("--check-timeout", check_timeout),
                    ("--tool-layer", tool_layer),
                    ("--plugin", plugin),
                )
                if value is not None
            ]
            if given:
                raise UserError(
                    f"--resume takes the settings from the evaluation's eval.json: "
                    f"leave out {', '.join(given)}"
                )
            chosen = get_backend(read_record(resume).settings.backend)
            plan = resume_plan(resume, keys_here=chosen.gateway_keys_from_host)
        else:
            if not agents:
                raise UserError("no agent given: use --agents with a comma-separated list")
            chosen = get_backend(backend)
            options = EvalOptions(
                tasks=[tasks] if tasks is not None else None,
                agents=[agents],
                models=[models or NO_MODEL],
                backend=backend,
                local=local,
                mode=mode or OFFERED_MODES[0],
                difficulty=contract.DEFAULT_DIFFICULTY if difficulty is None else difficulty,
                repeat=1 if repeat is None else repeat,
                timeout=contract.DEFAULT_AGENT_TIMEOUT if timeout is None else timeout,
                check_timeout=contract.DEFAULT_CHECK_TIMEOUT
                if check_timeout is None
                else check_timeout,
                egress=egress or "restricted",
                tool_layer=tool_layer,
                plugins=tuple(plugin or ()),
                keys_here=chosen.gateway_keys_from_host,
            )
            plan = plan_evaluation(
                options,
                results_root=Path(contract.HOST_RESULTS_ROOT),
                evals_root=EVALS_ROOT,
                now=utc_now(),
            )
        plan = with_images(plan, prebuilt=prebuilt)
        check_image_source(plan.record.settings.backend, chosen.builds_images, prebuilt)
        # Before choosing what to run: an orphan reaped now is recorded, then retried.
        reap_own_orphans(chosen, plan.results_root)
        pending, skipped = what_to_run(plan, chosen.prepare_images)
    except (SSEBenchError, OSError) as exc:
        fail(said(exc))
    display = EvalDisplay(total=len(plan.record.slots), skipped=len(skipped))
    _announce(display, plan, pending, skipped)
    evaluator = Evaluator(
        chosen, concurrency=concurrency, retries=retries, on_progress=display.update
    )
    try:
        with display.shown(), StopOnSignal(evaluator.stop):
            result = evaluator.run(plan, pending, skipped)
    except SecondSignal as interrupt:
        fail(
            f"ended by {interrupt}; runs in flight may be left unrecorded and are run again "
            f"by the same command (or --resume {eval_folder_shown(plan.folder)})",
            interrupt.exit_status,
        )
    except KeyboardInterrupt:
        fail("interrupted", 128 + signal.SIGINT)
    except OSError as exc:
        fail(said(exc))
    _finish(display, plan, evaluator.record or plan.record, result, json_output)


def _announce(
    display: EvalDisplay, plan: EvalPlan, pending: list[Pending], skipped: list[Skipped]
) -> None:
    console = display.console
    shown = eval_folder_shown(plan.folder)
    console.print(
        f"evaluation {shown}: {len(plan.record.slots)} runs, "
        f"{len(pending)} to run, {len(skipped)} skipped",
        markup=False,
    )
    reasons = {
        "infra_error": "to rerun after infra_error",
        "changed": "to rerun because their inputs changed",
        "stopped": "to rerun because they were stopped",
        "unrecorded": "to rerun because their last run left no outcome",
    }
    for reason, text in reasons.items():
        count = sum(1 for cell in pending if cell.reason == reason)
        if count:
            console.print(f"  {count} {text}", markup=False)
    if skipped:
        console.print(
            "  skipped (inputs unchanged, outcome recorded; delete the run directory to redo one):",
            markup=False,
        )
    for cell in skipped[:SKIPPED_SHOWN]:
        slot = plan.record.slots[cell.index]
        console.print(
            f"    {slot.task} {slot.agent} {slot.model} #{slot.repeat}: "
            f"{cell.summary.outcome} ({cell.summary.run_id})",
            markup=False,
        )
    if len(skipped) > SKIPPED_SHOWN:
        console.print(f"    ... and {len(skipped) - SKIPPED_SHOWN} more", markup=False)


def _finish(
    display: EvalDisplay,
    plan: EvalPlan,
    record: EvalRecord,
    result: EvalResult,
    json_output: bool,
) -> None:
    report = build_report(record)
    try:
        (plan.folder / MARKDOWN_FILE).write_text(render_markdown(report))
    except OSError as exc:
        display.console.print(
            f"ssebench: cannot write {MARKDOWN_FILE}: {exc.strerror}", markup=False
        )
    shown = eval_folder_shown(plan.folder)
    if json_output:
        click.echo(encode_json(report, pretty=True).decode(), nl=False)
    else:
        for group in report.groups:
            display.console.print(
                f"{group.agent} / {group.model}: {rate_text(group.pass_rate)}", markup=False
            )
        display.console.print(f"report: ssebench report {shown} --open", markup=False)
    unrecorded = [done for done in result.finished if done.summary is None]
    if result.stopped_by is None and unrecorded:
        fail(
            f"{len(unrecorded)} of the runs could not be made (see above); the same command "
            f"(or --resume {shown}) tries them again"
        )
    if result.stopped_by is not None:
        fail(
            f"stopped by {signal_name(result.stopped_by)}: the runs in flight were stopped and "
            f"recorded; the same command (or --resume {shown}) runs what is left",
            128 + result.stopped_by,
        )
