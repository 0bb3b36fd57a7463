"""`ssebench run` (also `ssebench-run`): run one agent against one task and record the grade."""

from __future__ import annotations

import contextlib
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import click
import typer

from ssebench.runner._console import fail, log_to_stderr, stdout_to_stderr
from ssebench.runner._lifecycle import Runner, said, utc_now
from ssebench.runner._options import (
    EGRESS_ENV,
    NO_MODEL,
    OFFERED_MODES,
    PREBUILT_ENV,
    check_image_source,
)
from ssebench.runner._orphans import reap_own_orphans
from ssebench.runner._plan import RunOptions, RunPlan, plan_run
from ssebench.runner._signals import SecondSignal
from ssebench.spec import (
    BACKEND_ENV,
    DEFAULT_BACKEND,
    PatchResult,
    SSEBenchError,
    Summary,
    contract,
    encode_json,
    get_backend,
    settings,
)
from ssebench.spec.terminal import terminal_safe

if TYPE_CHECKING:
    from rich.table import Table

log = logging.getLogger(__name__)

_STATUS_STYLE = {"passed": "bold green", "failed": "bold red", "error": "bold yellow"}


PrebuiltOption = Annotated[
    bool,
    typer.Option(
        "--prebuilt",
        envvar=PREBUILT_ENV,
        help="Run the images published under SSEBENCH_REGISTRY (`ssebench images push`); "
        "build nothing. Needed on a backend that cannot build (k8s).",
    ),
]
"""`--prebuilt`, as `ssebench run` and `ssebench eval` take it."""

ToolLayerOption = Annotated[
    str | None,
    typer.Option(
        "--tool-layer",
        metavar="NAME",
        help="The tool layer built on the case image, from the `ssebench.tool_layers` "
        "entry points. Sandbox mode only, not with --prebuilt. Default: sandbox.",
        show_default=False,
    ),
]
"""`--tool-layer`, as `ssebench run` and `ssebench eval` take it."""

PluginOption = Annotated[
    list[str] | None,
    typer.Option(
        "--plugin",
        metavar="NAME",
        help="A plugin of plugins.yaml to run (repeatable): exactly these run. "
        "Default: those plugins.yaml enables. Sandbox mode only.",
        show_default=False,
    ),
]
"""`--plugin`, as `ssebench run` and `ssebench eval` take it."""


def run_command(
    task: Annotated[
        str | None, typer.Option("--task", help="The task to run, by its ID.", show_default=False)
    ] = None,
    local: Annotated[
        Path | None,
        typer.Option(
            "--local",
            metavar="DIR",
            help="A dataset folder holding the task; without it the task comes from the catalog.",
            show_default=False,
        ),
    ] = None,
    catalog: Annotated[
        Path | None,
        typer.Option(
            "--catalog",
            metavar="PATH",
            help="A task catalog's manifest.json, used when --local is not given. "
            "Default: SSEBENCH_CATALOG, else the demo dataset's manifest.",
            show_default=False,
        ),
    ] = None,
    build: Annotated[
        bool,
        typer.Option(
            "--build",
            help="Build a catalog task's case image from its local folder (which must match "
            "the catalog) instead of pulling it.",
        ),
    ] = False,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="The agent: a folder with an agent.yaml under <home>/agents/ or on "
            "SSEBENCH_AGENT_PATH.",
            show_default=False,
        ),
    ] = None,
    mode: Annotated[
        str, typer.Option("--mode", metavar="[" + "|".join(OFFERED_MODES) + "]", help="How to run.")
    ] = OFFERED_MODES[0],
    backend: Annotated[
        str,
        typer.Option("--backend", envvar=BACKEND_ENV, help="The container platform to run on."),
    ] = DEFAULT_BACKEND,
    difficulty: Annotated[
        int,
        typer.Option(
            "--difficulty",
            help="0-4: which checks the agent may run itself (0 all, 4 none).",
        ),
    ] = contract.DEFAULT_DIFFICULTY,
    timeout: Annotated[int, typer.Option("--timeout", help="Seconds the agent may run.")] = (
        contract.DEFAULT_AGENT_TIMEOUT
    ),
    check_timeout: Annotated[
        int,
        typer.Option(
            "--check-timeout",
            help="Seconds each check (build, a PoC, tests) may run before it is stopped and fails.",
        ),
    ] = contract.DEFAULT_CHECK_TIMEOUT,
    egress: Annotated[
        str,
        typer.Option(
            "--egress",
            envvar=EGRESS_ENV,
            metavar="[restricted|open]",
            help="restricted: the model proxy only; open: also the internet.",
        ),
    ] = settings.EGRESS.default,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="A model named in models.yaml (the home's, or SSEBENCH_MODELS); `none` for "
            "agents that use no model.",
        ),
    ] = NO_MODEL,
    budget: Annotated[
        float | None,
        typer.Option(
            "--budget",
            metavar="USD",
            help="US dollars the run's model calls may cost. Default: models.yaml's.",
            show_default=False,
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            help="1-64 of letters, digits, '.', '_', '-', starting with a letter or digit. "
            "Default: the UTC start time and random hex, so IDs sort by time.",
            show_default=False,
        ),
    ] = None,
    keep_container: Annotated[
        bool,
        typer.Option(
            "--keep-container",
            help="Leave the container running after grading; ssebench returns once the "
            "run is recorded.",
        ),
    ] = False,
    require_pass: Annotated[
        bool, typer.Option("--require-pass", help="Exit with status 1 unless the run passed.")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the run's summary as JSON on stdout.")
    ] = False,
    prebuilt: PrebuiltOption = False,
    platform: Annotated[
        str | None,
        typer.Option(
            "--platform",
            metavar="linux/<arch>",
            help="The platform of every image and container of the run. "
            "Default: the backend's own.",
            show_default=False,
        ),
    ] = None,
    cpus: Annotated[
        float | None,
        typer.Option(
            "--cpus",
            help="CPUs the run may use. Default: 2, or more if the task's resources ask.",
            show_default=False,
        ),
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory",
            metavar="SIZE",
            help="Memory of the run, e.g. 4g or 512m; no swap beyond it. "
            "Default: 4g, or more if the task's resources ask.",
            show_default=False,
        ),
    ] = None,
    pids_limit: Annotated[
        int | None,
        typer.Option(
            "--pids-limit",
            help="Processes and threads the run may have at once. "
            "Default: 1024, or more if the task's resources ask.",
            show_default=False,
        ),
    ] = None,
    tool_layer: ToolLayerOption = None,
    plugin: PluginOption = None,
) -> None:
    """Run an agent against a task in a container, grade its patch and record the run.

    The run is recorded in results/<task>/<model>/<agent>/<run-id>/ under the
    current directory, whatever happens to its container.
    """
    options = RunOptions(
        task=task,
        agent=agent,
        backend=backend,
        local=local,
        mode=mode,
        difficulty=difficulty,
        timeout=timeout,
        check_timeout=check_timeout,
        egress=egress,
        run_id=run_id,
        keep=keep_container,
        prebuilt=prebuilt,
        platform=platform,
        model=model,
        budget=budget,
        cpus=cpus,
        memory=memory,
        pids_limit=pids_limit,
        catalog=catalog,
        build=build,
        tool_layer=tool_layer,
        plugins=tuple(plugin or ()),
    )
    try:
        chosen = get_backend(options.backend)
        plan = plan_run(
            options,
            results_root=Path(contract.HOST_RESULTS_ROOT),
            now=utc_now(),
            keys_here=chosen.gateway_keys_from_host,
        )
        check_image_source(plan.config.backend, chosen.builds_images, plan.prebuilt)
    except SSEBenchError as exc:
        fail(said(exc))
    quiet = stdout_to_stderr() if json_output else contextlib.nullcontext()
    try:
        with log_to_stderr(), quiet:
            reap_own_orphans(chosen, Path(contract.HOST_RESULTS_ROOT))
            summary = Runner(chosen).run(plan)
            if plan.config.keep:
                log.info("the container is kept: stop it with `ssebench runs stop %s`", plan.run_id)
    except SecondSignal as interrupt:
        fail(f"ended by {interrupt}; the run is recorded in {plan.run_dir}", interrupt.exit_status)
    except KeyboardInterrupt:
        # Before the run's container starts, or a third signal: nothing to stop or record.
        fail("interrupted", 128 + signal.SIGINT)
    except (SSEBenchError, OSError) as exc:
        fail(said(exc))
    if json_output:
        click.echo(encode_json(summary, pretty=True).decode(), nl=False)
    if summary.outcome == "infra_error":
        # The engine or the harness failed (the engine restarted, the container was killed
        # from outside, ...): the run says nothing about the agent, so no grade table.
        reason = " ".join(terminal_safe(summary.patch_result.error_msg or "no reason").split())
        where = _relative(plan.run_dir)
        fail(f"run {plan.run_id} ended in infra_error: {reason}; recorded in {where}")
    if not json_output:
        from rich.console import Console  # here: `--json` runs never need rich

        Console().print(summary_table(summary, plan))
    if require_pass and summary.patch_result.status != "passed":
        raise typer.Exit(1)


def _check(success: bool | None) -> str:
    if success is None:
        return "not run"
    return "passed" if success else "failed"


def _pocs(result: PatchResult) -> str:
    if result.pov_total is None:
        return "not run"
    return f"{result.pov_passed or 0} of {result.pov_total} fixed"


def summary_table(summary: Summary, plan: RunPlan) -> Table:
    """A short table of a recorded run: what ran, its grade, each check, where it is.

    Args:
        summary: the run's summary.
        plan: the run's plan, for its directory.

    Returns:
        A two-column rich table.
    """
    from rich.table import Table
    from rich.text import Text

    result = summary.patch_result
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column(style="bold")
    table.add_column()
    # Text, not markup: values such as an error message may hold brackets.
    rows = [
        ("task", Text(summary.task)),
        ("agent", Text(f"{summary.config.agent} {plan.agent.version}")),
        ("model", Text(summary.config.model)),
        ("status", Text(result.status, style=_STATUS_STYLE[result.status])),
        ("outcome", Text(summary.outcome or "-")),
        *(
            [("spend", Text(f"${summary.spend:.4f} of ${summary.config.budget or 0:.4f}"))]
            if summary.spend is not None
            else []
        ),
        ("build", Text(_check(result.build_success))),
        ("poc", Text(_pocs(result))),
        ("function_test", Text(_check(result.func_test_success))),
        ("intent_test", Text(_check(result.intent_test_success))),
    ]
    if result.error_msg:
        rows.append(("error", Text(terminal_safe(result.error_msg), style="yellow")))
    if result.dropped:
        shown = ", ".join(result.dropped[:10]) + (" ..." if len(result.dropped) > 10 else "")
        rows.append(("dropped", Text(terminal_safe(f"protected, not graded: {shown}"))))
    rows.append(("run directory", Text(str(_relative(plan.run_dir)))))
    for name, value in rows:
        table.add_row(name, value)
    return table


def _relative(path: Path) -> Path:
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


run_app = typer.Typer(
    name="ssebench-run",
    add_completion=False,
    pretty_exceptions_enable=False,
)
run_app.command()(run_command)
