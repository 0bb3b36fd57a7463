"""`python -m ssebench.daemon.evaluator`: grade over the admin socket, write the results."""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ssebench.daemon._client._api import DaemonApi
from ssebench.daemon._environ import parse_check_timeout
from ssebench.daemon._errors import ConfigError
from ssebench.daemon.evaluator._files import write_result, write_source_archive
from ssebench.daemon.evaluator._grading import Deadline, GradingApi, Say, grade, tail
from ssebench.spec import PatchResult, Result, RuntimeResult, contract


@dataclass(frozen=True, kw_only=True)
class EvaluatorOptions:
    """What the evaluator needs: where to grade and what the entrypoint saw of the agent."""

    admin_socket: Path = Path(contract.ADMIN_SOCKET)
    results_dir: Path = Path(contract.RESULTS_DIR)
    timeout: float | None = None
    """The grading budget in seconds; None: sized from the task's checks (`grading_budget`)."""
    check_timeout: float = float(contract.DEFAULT_CHECK_TIMEOUT)
    """One check's limit at most (`SSE_CHECK_TIMEOUT`)."""
    agent_duration: float | None = None
    agent_exit_code: int | None = None
    agent_timeout: bool = False
    source_archive: bool = True


def _runtime(options: EvaluatorOptions, *, evaluator_timeout: bool) -> RuntimeResult:
    return RuntimeResult(
        agent_duration=options.agent_duration,
        agent_timeout=options.agent_timeout,
        evaluator_timeout=evaluator_timeout,
        agent_exit_code=options.agent_exit_code,
    )


def evaluate(
    options: EvaluatorOptions, *, api: GradingApi | None = None, say: Say = print
) -> Result:
    """Grade the agent's final diff and write `result.json` and `source.tar.gz`.

    Args:
        options: sockets, paths, time limits and the agent's run.
        api: the daemon's admin routes (default: the admin socket of `options`).
        say: where progress lines go.

    Returns:
        The grade as written.

    Raises:
        OSError: `result.json` cannot be written.
    """
    deadline = Deadline(options.timeout, check_timeout=options.check_timeout)
    daemon = api or DaemonApi(str(options.admin_socket))
    # The archive is written while the checks run (they work on copies of the
    # tree, which stops changing once grading is prepared), but never holds up
    # the grade: result.json is written first whatever the archive's progress.
    archive = threading.Thread(
        target=_archive_source,
        args=(daemon, options.results_dir, say),
        name="source-archive",
        daemon=True,
    )
    try:
        found = grade(
            daemon,
            deadline,
            say,
            prepared=archive.start if options.source_archive else (lambda: None),
        )
        result = Result(
            patch_result=found.patch_result(),
            runtime_result=_runtime(options, evaluator_timeout=found.timed_out),
        )
        write_result(options.results_dir, result)
        say(f"wrote {options.results_dir / contract.RESULT_FILE}: {result.patch_result.status}")
        if options.source_archive and archive.ident is None:
            archive.start()  # grading stopped before it was prepared
    finally:
        if archive.ident is not None:
            archive.join()
    return result


def _archive_source(daemon: GradingApi, results_dir: Path, say: Say) -> None:
    """Write source.tar.gz; a failure is reported, never fatal to the grade."""
    try:
        source = Path(daemon.project().source)
        path, skipped = write_source_archive(source, results_dir)
    except Exception as exc:  # the grade matters more than the archive
        say(f"source.tar.gz not written: {exc}")
        return
    say(f"wrote {path}" + (f" (left out: {', '.join(skipped[:20])})" if skipped else ""))


def crash_result(options: EvaluatorOptions, exc: BaseException) -> Result:
    """The grade of an evaluator that failed: status `error`, the traceback as its log."""
    log = "".join(traceback.format_exception(exc))
    return Result(
        patch_result=PatchResult(
            status="error",
            error_msg=f"the evaluator crashed: {type(exc).__name__}: {exc}",
            error_log=tail(log),
            error_source="harness",
        ),
        runtime_result=_runtime(options, evaluator_timeout=False),
    )


def parse_options(argv: Sequence[str], environ: Mapping[str, str]) -> EvaluatorOptions:
    """The options from the command line, defaults from the environment and the contract.

    Raises:
        SystemExit: a bad command line (argparse's usage message, status 2).
    """
    parser = argparse.ArgumentParser(
        prog="python -m ssebench.daemon.evaluator",
        description="Grade the agent's final diff over the daemon's admin socket.",
    )
    parser.add_argument("--admin-socket", type=Path, default=Path(contract.ADMIN_SOCKET))
    parser.add_argument(
        "--results",
        type=Path,
        default=Path(environ.get(contract.ENV_RESULTS) or contract.RESULTS_DIR),
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="the evaluator's time limit in seconds (default: enough for every check "
        "of the task at its full limit)",
    )
    parser.add_argument(
        "--check-timeout",
        type=float,
        default=None,
        help=f"one check's time limit at most (default: {contract.ENV_CHECK_TIMEOUT})",
    )
    parser.add_argument("--agent-duration", type=float)
    parser.add_argument("--agent-exit-code", type=int)
    parser.add_argument("--agent-timeout", action="store_true")
    parser.add_argument("--no-source-archive", action="store_true")
    args = parser.parse_args(list(argv))
    if args.check_timeout is None:
        try:
            args.check_timeout = parse_check_timeout(environ.get(contract.ENV_CHECK_TIMEOUT))
        except ConfigError as exc:
            parser.error(str(exc))
    for name, value in (("--timeout", args.timeout), ("--check-timeout", args.check_timeout)):
        if value is not None and not (math.isfinite(value) and value > 0):
            parser.error(f"{name} must be a positive number of seconds")
    return EvaluatorOptions(
        admin_socket=args.admin_socket,
        results_dir=args.results,
        timeout=args.timeout,
        check_timeout=args.check_timeout,
        agent_duration=args.agent_duration,
        agent_exit_code=args.agent_exit_code,
        agent_timeout=args.agent_timeout,
        source_archive=not args.no_source_archive,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the evaluator.

    Returns:
        0 when `result.json` was written (whatever the grade), 1 when it could not be.
    """
    options = parse_options(sys.argv[1:] if argv is None else argv, os.environ)

    said = threading.Lock()

    def say(line: str) -> None:
        # One write per line, under a lock: the source archive's thread says things too.
        with said:
            sys.stdout.write(f"evaluator: {line}\n")
            sys.stdout.flush()

    try:
        evaluate(options, say=say)
    except Exception as exc:
        say(f"failed: {type(exc).__name__}: {exc}")
        try:
            write_result(options.results_dir, crash_result(options, exc))
        except OSError as write_error:
            say(f"cannot write result.json: {write_error}")
            return 1
    return 0
