"""Grading over the admin socket: prepare_grading, build, every PoC, function and intent tests.

The order is DESIGN.md §7's: a failing build stops grading (nothing else can
say anything about the patch); every PoC runs, each on its own, in the
build's copy; then the project's tests and the hidden ones. A check the
task lacks is not run and stays null.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from ssebench.daemon._client import DaemonUnreachableError
from ssebench.daemon._client._api import DaemonProtocolError, DaemonRefusedError
from ssebench.daemon._gate import Action
from ssebench.daemon._messages import (
    BencherRequest,
    BencherResponse,
    CapabilitiesResponse,
    PrepareGradingResponse,
    ProjectResponse,
)
from ssebench.spec import PatchResult, Status

PATCH_REFUSALS: Final = frozenset({"patch_did_not_apply", "tree_unreadable"})
"""Codes of a prepare_grading refusal that the agent's patch itself caused: `failed`."""

LOG_TAIL_CHARS: Final = 32 * 1024
"""Characters of each output stream kept in `error_log` (its end; the full log is a check log)."""


class GradingApi(Protocol):
    """The admin routes grading needs (`DaemonApi` in the container; fakes in tests)."""

    def capabilities(self) -> CapabilitiesResponse:
        """`GET /capabilities` on the admin socket: every check the task has."""
        ...

    def prepare_grading(self, *, timeout: float | None) -> PrepareGradingResponse:
        """`POST /prepare_grading`."""
        ...

    def project(self) -> ProjectResponse:
        """`GET /project`: where the agent's tree is (`source`)."""
        ...

    def bencher(
        self, action: Action, request: BencherRequest, *, timeout: float | None
    ) -> BencherResponse:
        """`POST /tool/bencher?action=…` with `grading: true`."""
        ...


class GradingTimeoutError(TimeoutError):
    """The evaluator's own time limit ran out."""


class Deadline:
    """The evaluator's time limit, handed out to each request as what is left of it."""

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.seconds = seconds
        self.end = clock() + seconds

    def remaining(self) -> float:
        """Seconds left.

        Raises:
            GradingTimeoutError: none are left.
        """
        left = self.end - self.clock()
        if left <= 0:
            raise GradingTimeoutError(f"the evaluator's time limit ({self.seconds:g} s) ran out")
        return left


@dataclass
class Grade:
    """What grading found so far; `patch_result()` turns it into the grade."""

    build_success: bool | None = None
    pov_passed: int | None = None
    pov_total: int | None = None
    func_test_success: bool | None = None
    intent_test_success: bool | None = None
    error_msg: str | None = None
    error_log: str | None = None
    infrastructure_error: bool = False
    patch_refused: bool = False
    timed_out: bool = False
    notes: list[str] = field(default_factory=list)

    def ran_any(self) -> bool:
        """Whether at least one check ran."""
        return any(
            value is not None
            for value in (
                self.build_success,
                self.pov_total,
                self.func_test_success,
                self.intent_test_success,
            )
        )

    def all_passed(self) -> bool:
        """Whether every check that ran passed."""
        return (
            self.build_success is not False
            and self.pov_passed == self.pov_total
            and self.func_test_success is not False
            and self.intent_test_success is not False
        )

    def fail(self, message: str, log: str | None = None) -> None:
        """Record a failure; only the first one is kept in `error_msg`/`error_log`."""
        self.notes.append(message)
        if self.error_msg is None:
            self.error_msg = message
            self.error_log = log

    def patch_result(self) -> PatchResult:
        """The grade: `error` when grading itself failed, timed out or ran no check;
        `failed` when the agent's diff cannot be graded (it does not apply, or the
        agent closed its tree); `passed` when at least one check ran and all that
        ran passed; else `failed`."""
        status: Status
        if self.infrastructure_error or self.timed_out:
            status = "error"
        elif self.patch_refused:
            status = "failed"
        elif not self.ran_any():
            status = "error"
            if self.error_msg is None:
                self.error_msg = "no check ran: the task has none"
        else:
            status = "passed" if self.all_passed() else "failed"
        return PatchResult(
            status=status,
            build_success=self.build_success,
            pov_passed=self.pov_passed,
            pov_total=self.pov_total,
            func_test_success=self.func_test_success,
            intent_test_success=self.intent_test_success,
            error_msg=self.error_msg,
            error_log=self.error_log,
        )


def tail(text: str, limit: int = LOG_TAIL_CHARS) -> str:
    """The end of `text`, at most `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} characters cut ...]\n{text[-limit:]}"


def output_log(response: BencherResponse) -> str:
    """A check's output as `error_log` shows it: stdout, then stderr, each cut to its tail."""
    parts = []
    if response.stdout:
        parts.append(f"--- stdout ---\n{tail(response.stdout)}")
    if response.stderr:
        parts.append(f"--- stderr ---\n{tail(response.stderr)}")
    if response.truncated:
        parts.append("(the daemon kept only the first MiB of each stream)")
    if response.timed_out:
        parts.append("(the check was stopped at its time limit, SSE_CHECK_TIMEOUT)")
    return "\n".join(parts) or "(no output)"


def _status(response: BencherResponse) -> str:
    if response.timed_out:
        return "was stopped at its time limit"
    return f"exited with status {response.code}"


Say = Callable[[str], None]


def grade(
    api: GradingApi,
    deadline: Deadline,
    say: Say = lambda _: None,
    prepared: Callable[[], None] = lambda: None,
) -> Grade:
    """Grade the agent's final diff.

    Args:
        api: the daemon's admin routes.
        deadline: the evaluator's time limit.
        say: where progress lines go (the evaluator's log).
        prepared: called once prepare_grading succeeded: the agent's tree no
            longer changes from then on.

    Returns:
        What grading found; never raises for a failure of the daemon, a
        timeout or a check: those are recorded in the grade.
    """
    result = Grade()
    try:
        _grade(api, deadline, say, result, prepared)
    except GradingTimeoutError as exc:
        result.timed_out = True
        result.fail(str(exc))
    except TimeoutError:
        result.timed_out = True
        result.fail(f"the evaluator's time limit ({deadline.seconds:g} s) ran out during a check")
    except DaemonRefusedError as exc:
        # Nothing the agent does turns `failed` into `error` (DESIGN.md §4): a diff that
        # cannot be applied or read is the agent's, not the harness's.
        if exc.code in PATCH_REFUSALS:
            result.patch_refused = True
            result.fail(f"the agent's diff cannot be graded: {exc.detail}")
        else:
            result.infrastructure_error = True
            result.fail(str(exc))
    except (DaemonUnreachableError, DaemonProtocolError, ConnectionError) as exc:
        result.infrastructure_error = True
        result.fail(f"grading lost the daemon: {exc}")
    say(f"grade: {result.patch_result().status}")
    return result


def _grade(
    api: GradingApi, deadline: Deadline, say: Say, result: Grade, prepared: Callable[[], None]
) -> None:
    caps = api.capabilities()
    say(
        f"task checks: build={caps.can_build} pocs={caps.poc_count} "
        f"function_test={caps.has_function_test} intent_test={caps.has_intent_test}"
    )
    diff = api.prepare_grading(timeout=deadline.remaining())
    say(f"prepare_grading: {diff.patch_bytes} bytes of diff applied")
    prepared()

    def check(action: Action, request: BencherRequest) -> BencherResponse:
        response = api.bencher(action, request, timeout=deadline.remaining())
        say(f"{action}{'' if request.poc is None else f' {request.poc}'}: code {response.code}")
        return response

    if caps.can_build:
        build = check("build", BencherRequest(grading=True))
        result.build_success = build.code == 0
        if not result.build_success:
            result.fail(f"build failed: build.sh {_status(build)}", output_log(build))
            return
    if caps.can_run_poc and caps.poc_count > 0:
        passed = 0
        for index in range(caps.poc_count):
            poc = check("run_poc", BencherRequest(poc=index, grading=True))
            if poc.code == 0:
                passed += 1
            else:
                result.fail(
                    f"PoC {index + 1} of {caps.poc_count} still triggers the bug: "
                    f"run.sh {_status(poc)}",
                    output_log(poc),
                )
        result.pov_passed, result.pov_total = passed, caps.poc_count
    if caps.has_function_test:
        tests = check("function_test", BencherRequest(grading=True))
        result.func_test_success = tests.code == 0
        if not result.func_test_success:
            result.fail(f"function tests failed: test.sh {_status(tests)}", output_log(tests))
    if caps.has_intent_test:
        intent = check("intent_test", BencherRequest(grading=True))
        result.intent_test_success = intent.code == 0
        if not result.intent_test_success:
            result.fail(
                f"intent tests failed: the hidden tests with test.sh {_status(intent)}",
                output_log(intent),
            )
