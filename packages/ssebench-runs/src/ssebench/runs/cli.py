"""`ssebench-runs`, also mounted as `ssebench runs`: find, watch, stop and reach runs.

Each command imports only what it needs: the backend's entry point for the
commands that talk to a platform, rich for tables only, neither for
`results --json`. Start-up time is most of what `list --json` costs.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from ssebench.runs._console import fail, reported, say, write_json
from ssebench.spec import BACKEND_ENV, DEFAULT_BACKEND, contract

if TYPE_CHECKING:
    from ssebench.spec import Backend, ContainerRole, RunInfo


EXIT_CODES: Final = (
    "Exit status: 0 done; 1 an error (one line on stderr); 2 a usage error; "
    "3 no run has the ID; 4 several runs have the ID."
)
"""The exit statuses of every command that names a run, shown in its help."""

ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What `exec --env` accepts: a variable's name, never a value."""

DEFAULT_RESULTS: Final = Path(contract.HOST_RESULTS_ROOT)
"""Where `ssebench run` records runs, relative to the current directory."""

BackendOption = Annotated[
    str,
    typer.Option(
        "--backend",
        envvar=BACKEND_ENV,
        help="The container platform the runs are on.",
    ),
]
RunIdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The run's ID (its --run-id).", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]
ContainerOption = Annotated[
    str,
    typer.Option(
        "--container",
        metavar="[task|agent]",
        help="Which container of the run: task (the checker: the daemon and the project) "
        "or agent (the agent's, where only model runs).",
    ),
]
CONTAINERS: Final[tuple[ContainerRole, ...]] = ("task", "agent")
"""What `--container` accepts."""


def _container(value: str) -> ContainerRole:
    for known in CONTAINERS:
        if value == known:
            return known
    fail(f"--container {value!r} is not a container of a run: use task or agent")


app = typer.Typer(
    name="ssebench-runs",
    help="Find, watch, stop and reach the runs that exist. " + EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _backend_and_run(backend: str, run_id: str) -> tuple[Backend[Any], RunInfo]:
    from ssebench.runs._select import find_run, open_backend

    chosen = open_backend(backend)
    return chosen, find_run(chosen, run_id)


@app.command("list", epilog="Exit status: 0 done; 1 an error; 2 a usage error.")
def list_command(json_output: JsonOption = False, backend: BackendOption = DEFAULT_BACKEND) -> None:
    """List the runs of `ssebench run` (label ssebench.webui=true), running or not, newest first.

    --json prints {"backend", "supports_exec", "runs"}.
    """
    from ssebench.runs._entries import RunList, run_entry
    from ssebench.runs._select import list_runs, open_backend

    with reported():
        chosen = open_backend(backend)
        entries = [run_entry(run) for run in list_runs(chosen)]
        if json_output:
            listed = RunList(backend=chosen.name, supports_exec=chosen.supports_exec, runs=entries)
            write_json(listed)
            return
        if not entries:
            say(f"no runs on the {chosen.name} backend")
            return
        from ssebench.runs._render import runs_table, show

        show(runs_table(chosen.name, entries))


@app.command("inspect", epilog=EXIT_CODES)
def inspect_command(
    run_id: RunIdArgument, json_output: JsonOption = False, backend: BackendOption = DEFAULT_BACKEND
) -> None:
    """Show one run: its state, image, task, model, agent, run directory and labels."""
    from ssebench.runs._entries import run_entry

    with reported():
        _, run = _backend_and_run(backend, run_id)
        entry = run_entry(run)
        if json_output:
            write_json(entry)
            return
        from ssebench.runs._render import run_table, show

        show(run_table(entry))


@app.command("logs", epilog=EXIT_CODES)
def logs_command(
    run_id: RunIdArgument,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the run exits.")
    ] = False,
    backend: BackendOption = DEFAULT_BACKEND,
) -> None:
    """Print the run's output, stdout and stderr together.

    Control characters (escape sequences, carriage returns, ...) the run
    printed are stripped: what reaches a terminal is tamed (docs/integrity.md).
    """
    from ssebench.spec.terminal import terminal_safe

    with reported():
        chosen, run = _backend_and_run(backend, run_id)
        out = sys.stdout
        for line in chosen.logs(run.handle, follow=follow):
            out.write(terminal_safe(line) + "\n")
            if follow:
                out.flush()
        out.flush()


@app.command("stop", epilog=EXIT_CODES)
def stop_command(
    run_id: RunIdArgument,
    grace: Annotated[
        float,
        typer.Option("--grace", metavar="SECONDS", min=0, help="Seconds before it is killed."),
    ] = contract.STOP_GRACE,
    backend: BackendOption = DEFAULT_BACKEND,
) -> None:
    """Stop the run's containers (SIGTERM, then SIGKILL after the grace) and leave them in place."""
    with reported():
        chosen, run = _backend_and_run(backend, run_id)
        chosen.stop(run.handle, grace=grace)
        say(f"stopped run {run_id}")


@app.command("remove", epilog=EXIT_CODES)
def remove_command(run_id: RunIdArgument, backend: BackendOption = DEFAULT_BACKEND) -> None:
    """Remove what the run left (containers, volumes), running or not.

    Exits with status 1 if anything of the run still exists afterwards.
    """
    from ssebench.spec import labels

    with reported():
        chosen, run = _backend_and_run(backend, run_id)
        chosen.remove(run.handle)
        left = chosen.list_runs({labels.RUN_ID: run_id})
        if left:
            names = ", ".join(sorted(other.name for other in left))
            fail(f"removing run {run_id} left {names} in place")
        say(f"removed run {run_id}")


@app.command("endpoint", epilog=EXIT_CODES)
def endpoint_command(
    run_id: RunIdArgument,
    port: Annotated[
        int,
        typer.Argument(min=1, max=65535, help="A port of the run's container (daemon: 4263)."),
    ],
    json_output: JsonOption = False,
    container: ContainerOption = "task",
    backend: BackendOption = DEFAULT_BACKEND,
) -> None:
    """Print the URL at which this machine reaches PORT of a running run.

    The URL stays valid after this command exits. --json prints {"run_id", "port", "url"}.
    """
    from ssebench.runs._entries import Endpoint
    from ssebench.runs._errors import NotRunningError

    role = _container(container)
    with reported():
        chosen, run = _backend_and_run(backend, run_id)
        if run.state != "running":
            raise NotRunningError(f"run {run_id} is not running ({run.state})")
        url = chosen.endpoint(run.handle, port, container=role)
        if json_output:
            write_json(Endpoint(run_id=run_id, port=port, url=url))
        else:
            typer.echo(url)


@app.command(
    "exec",
    epilog=EXIT_CODES + " Otherwise the command's own status.",
    no_args_is_help=True,
)
def exec_command(
    run_id: RunIdArgument,
    command: Annotated[
        list[str],
        typer.Argument(metavar="-- COMMAND...", help="What to run, after --.", show_default=False),
    ],
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="Run as this user.", show_default=False)
    ] = None,
    workdir: Annotated[
        str | None,
        typer.Option("--workdir", "-w", help="Run in this directory.", show_default=False),
    ] = None,
    tty: Annotated[bool, typer.Option("--tty", "-t", help="Give the command a terminal.")] = False,
    stdin: Annotated[
        bool, typer.Option("--stdin", "-i", help="Attach this standard input.")
    ] = False,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            "-e",
            metavar="NAME",
            help="Pass this variable with its value here; the value never appears "
            "on a command line. Repeatable.",
            show_default=False,
        ),
    ] = None,
    container: ContainerOption = "task",
    backend: BackendOption = DEFAULT_BACKEND,
) -> None:
    """Run COMMAND in a running run's container, in place of this process.

    COMMAND reaches the container as separate arguments, never through a shell.
    The run is marked touched (summary.json `touched`): if its grade is not yet
    recorded, evaluations leave it out of pass rates by default.
    """
    from ssebench.runs._errors import NotRunningError, RunsError

    role = _container(container)
    if role == "agent" and user is not None and user.partition(":")[0] in ("root", "0"):
        fail("--user root --container agent: the agent container never runs root; use task")
    names = env or []
    for name in names:
        if ENV_NAME.fullmatch(name) is None:
            fail(f"--env takes a variable's name, not {name.partition('=')[0]!r}=...")
        if name not in os.environ:
            fail(f"--env {name}: {name} is not set in this environment")
    with reported():
        chosen, run = _backend_and_run(backend, run_id)
        if not chosen.supports_exec:
            raise RunsError(f"the {chosen.name} backend cannot run commands in a run")
        if run.state != "running":
            raise NotRunningError(f"run {run_id} is not running ({run.state})")
        argv = chosen.exec_argv(
            run.handle,
            command,
            user=user,
            workdir=workdir,
            tty=tty,
            stdin=stdin,
            env_names=names,
            container=role,
        )
        _mark_touched(run)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(argv[0], argv)  # noqa: S606 - the backend's command, arguments never via a shell
    except OSError as exc:
        fail(f"cannot run {argv[0]}: {exc.strerror or exc}")


def _mark_touched(run: RunInfo) -> None:
    """Record in the run directory that a person ran a command in the run (`summary.json`
    `touched`); refuse to run it when that cannot be recorded."""
    from ssebench.runs._errors import RunsError
    from ssebench.spec import labels
    from ssebench.spec.touched import mark_touched

    folder = run.labels.get(labels.RESULTS)
    if not folder:
        raise RunsError(f"run {run.run_id} names no run directory to record that it was touched")
    try:
        mark_touched(Path(folder))
    except OSError as exc:
        raise RunsError(
            f"cannot record in {folder} that run {run.run_id} was touched: {exc.strerror or exc}"
        ) from exc


@app.command(
    "reap", epilog="Exit status: 0 done; 1 an error, or a run not removed; 2 a usage error."
)
def reap_command(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be reaped; change nothing.")
    ] = False,
    include_kept: Annotated[
        bool,
        typer.Option(
            "--include-kept", help="Also reap kept runs (--keep-container) of dead runners."
        ),
    ] = False,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            metavar="DIR",
            help="Only runs recorded under this results folder. Default: every run.",
            show_default=False,
        ),
    ] = None,
    json_output: JsonOption = False,
    backend: BackendOption = DEFAULT_BACKEND,
) -> None:
    """Remove the runs whose runner died, and record each one it left without a summary.

    A run's runner is dead when it was started on this machine and the process
    that started it (its PID and start time, on this boot) is gone. Runs of live
    runners, of other machines, and kept runs (unless --include-kept) are never
    touched. A reaped run directory without summary.json is recorded as
    infra_error with the reason. --json prints a list of {"run_id", "name",
    "state", "runner_pid", "run_dir", "action", "recorded", "detail"}.
    """
    from ssebench.runs._select import open_backend
    from ssebench.spec.reaper import ReapOptions, gateway_settle, reap

    with reported():
        chosen = open_backend(backend)
        options = ReapOptions(dry_run=dry_run, include_kept=include_kept, under=directory)
        reaped = reap(chosen, options, settle=gateway_settle(chosen))
        if json_output:
            write_json(reaped)
        else:
            for run in reaped:
                recorded = "; recorded as infra_error" if run.recorded else ""
                detail = f": {run.detail}" if run.detail else ""
                say(
                    f"{run.action} run {run.run_id} ({run.name}, {run.state}; "
                    f"runner pid {run.runner_pid} is gone){recorded}{detail}"
                )
            if not reaped:
                say(f"nothing to reap on the {chosen.name} backend")
        failed = [run.run_id for run in reaped if run.action == "failed"]
        if failed:
            fail(f"could not reap {len(failed)} run(s): {', '.join(failed)}")


@app.command("results", epilog="Exit status: 0 done; 1 an error; 2 a usage error.")
def results_command(
    json_output: JsonOption = False,
    directory: Annotated[
        Path,
        typer.Option("--dir", metavar="DIR", help="The results folder."),
    ] = DEFAULT_RESULTS,
) -> None:
    """List the finished runs recorded in DIR, newest first, whether or not their containers exist.

    Reads the summary.json files only: needs no backend. A file that is not a
    run's summary is skipped with a warning. --json prints a list of
    {"run_id", "task", "agent", "model", "status", "outcome", "checks", "started_at",
    "run_dir"}; "outcome" is null for runs recorded before outcomes existed.
    """
    from ssebench.runs._console import warn
    from ssebench.runs._results import scan_results

    with reported():
        runs = scan_results(directory, warn)
        if json_output:
            write_json(runs)
            return
        if not runs:
            say(f"no finished runs in {directory}")
            return
        from ssebench.runs._render import results_table, show

        show(results_table(runs))


def main() -> None:
    """Entry point of the `ssebench-runs` executable."""
    app(prog_name="ssebench-runs")
