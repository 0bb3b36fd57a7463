"""Grading over the admin socket: prepare_grading, build, every PoC, function and intent tests.

The order is docs/results.md's: a failing build stops grading (nothing else can
say anything about the patch); every PoC runs, each on its own, in the
build's copy; then the project's tests and the hidden ones. A check the
task lacks is not run and stays null.

Each check is sent with its own time limit, its share of what is left of the
evaluator's budget (`Deadline.check_limit`); the daemon stops it there, and a
check that did not finish is that check failing. Nothing the agent does
turns `failed` into `error` (docs/integrity.md): `error` is left to the harness —
a daemon that refuses, breaks the protocol or stops answering, a crash, a
budget spent by the harness itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from ssebench.daemon._budget import (
    CHECK_MARGIN,
    GRADE_RESERVE,
    MIN_CHECK_LIMIT,
    PREPARE_ALLOWANCE,
    count_checks,
    grading_budget,
)
from ssebench.daemon._client import (
    DaemonConnectionError,
    DaemonDiffTooLargeError,
    DaemonPatchDidNotApplyError,
    DaemonProtocolError,
    DaemonRefusedError,
    DaemonTreeUnreadableError,
)
from ssebench.daemon._gate import Action
from ssebench.daemon._messages import (
    BencherRequest,
    BencherResponse,
    CapabilitiesResponse,
    PrepareGradingResponse,
    ProjectResponse,
)
from ssebench.spec import ErrorSource, PatchResult, Status, contract
from ssebench.spec.protected import listed

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


class TaskBrokenError(Exception):
    """A check could not execute a program of the task (its script or its interpreter)."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


class Deadline:
    """The evaluator's budget, handed out to each request: a check gets an equal share of
    what is left over the checks still to run, at most the check limit.

    Rule enforced (docs/integrity.md): nothing the agent does turns `failed` into `error`.
    A check that hangs is stopped by the daemon at its share and answered as timed
    out, which grades it failed; the checks after it still get their share, because
    each check takes at most its limit plus the daemon's margin, and so never more
    than its part of the budget. What is kept back (`reserve`, for writing the grade,
    and `margin` per check, for the daemon's work around it) is never handed to a
    check; a small budget (a test, a manual run) keeps a tenth of itself for each
    instead of the full constants.
    """

    def __init__(
        self,
        seconds: float | None = None,
        *,
        check_timeout: float = float(contract.DEFAULT_CHECK_TIMEOUT),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Start the clock.

        Args:
            seconds: the budget; None: sized by `cover` from the task's checks
                (`grading_budget`) once grading knows them.
            check_timeout: one check's limit at most (`SSE_CHECK_TIMEOUT`).
            clock: seconds from a monotonic clock (tests pass a fake).
        """
        self.clock = clock
        self.started = clock()
        self.check_timeout = check_timeout
        self.seconds = 0.0
        self.end = self.started
        self.reserve = 0.0
        self.margin = 0.0
        self.sized = seconds is not None
        if seconds is not None:
            self._size(seconds)

    def _size(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = self.started + seconds
        self.reserve = min(GRADE_RESERVE, seconds / 10)
        self.margin = min(CHECK_MARGIN, seconds / 10)

    def cover(self, checks: int) -> None:
        """Size a budget left open to hold `checks` checks at their full limit."""
        if not self.sized:
            self._size(grading_budget(checks, self.check_timeout))
            self.sized = True

    def usable(self) -> float:
        """Seconds left that a request may use: all but the reserve.

        Raises:
            GradingTimeoutError: none are left.
        """
        usable = self.end - self.clock() - self.reserve
        if usable <= 0:
            raise GradingTimeoutError(f"the evaluator's time limit ({self.seconds:g} s) ran out")
        return usable

    def spent(self) -> bool:
        """Whether nothing but the reserve is left: a request that timed out now was cut
        short by the budget, not by its own limit."""
        return self.sized and self.end - self.clock() <= self.reserve + 0.01  # rounding

    def prepare_limit(self) -> float:
        """How long `prepare_grading` may take: its allowance, within what may be used.

        Raises:
            GradingTimeoutError: nothing may be used.
        """
        return min(PREPARE_ALLOWANCE, self.usable())

    def check_limit(self, checks_left: int) -> float:
        """The next check's time limit: an equal share of what may be used, less a margin
        per check, over the `checks_left` checks still to run (this one included), at
        most the check limit.

        Raises:
            GradingTimeoutError: the share would be under `MIN_CHECK_LIMIT`: the budget
                is spent, by the harness (a check takes at most its share and margin).
        """
        share = self.usable() / max(checks_left, 1) - self.margin
        if share < MIN_CHECK_LIMIT:
            raise GradingTimeoutError(
                f"the evaluator's time limit ({self.seconds:g} s) ran out: "
                f"{max(share, 0):.1f} s left for each of the {checks_left} checks still to run"
            )
        return min(self.check_timeout, share)

    def wait_limit(self, check_limit: float) -> float:
        """How long to wait for a check's answer: its limit plus the daemon's margin,
        within what may be used."""
        return min(check_limit + self.margin, self.usable())


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
    task_broken: bool = False
    dropped: list[str] = field(default_factory=list)
    """Protected paths the agent changed, left out of the graded diff."""
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
        """The grade: `error` when grading itself failed or timed out (source `harness`),
        or the task is broken or has no check (source `task`); `failed` when the
        agent's diff cannot be graded (it does not apply, or the agent closed its
        tree); `passed` when at least one check ran and all that ran passed; else
        `failed`."""
        status: Status
        source: ErrorSource | None = None
        if self.infrastructure_error or self.timed_out:
            status, source = "error", "harness"
        elif self.patch_refused:
            status = "failed"
        elif self.task_broken or not self.ran_any():
            status, source = "error", "task"
            if self.error_msg is None:
                self.error_msg = "no check ran: the task has none"
        else:
            status = "passed" if self.all_passed() else "failed"
        error_msg = self.error_msg
        if self.dropped and status == "failed" and error_msg is not None:
            error_msg += (
                " (graded without the agent's changes to protected paths: "
                f"{listed(self.dropped, 5)})"
            )
        return PatchResult(
            status=status,
            build_success=self.build_success,
            pov_passed=self.pov_passed,
            pov_total=self.pov_total,
            func_test_success=self.func_test_success,
            intent_test_success=self.intent_test_success,
            error_msg=error_msg,
            error_log=self.error_log,
            error_source=source,
            dropped=self.dropped,
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
        parts.append("(the check was stopped at its time limit)")
    return "\n".join(parts) or "(no output)"


@dataclass(frozen=True)
class Checked:
    """A check's answer and the time limit it was sent with."""

    response: BencherResponse
    limit: float

    @property
    def passed(self) -> bool:
        """Whether the check's script exited with status 0."""
        return self.response.code == 0

    def log(self) -> str:
        """Its output as `error_log` shows it."""
        return output_log(self.response)


def _seconds(value: float) -> str:
    return f"{round(value, 1):g} s"


def _status(checked: Checked) -> str:
    if checked.response.timed_out:
        return f"did not finish within {_seconds(checked.limit)}"
    return f"exited with status {checked.response.code}"


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
        deadline: the evaluator's budget (sized from the task's checks if left open).
        say: where progress lines go (the evaluator's log).
        prepared: called once prepare_grading succeeded: the agent's tree no
            longer changes from then on.

    Returns:
        What grading found; never raises for a failure of the daemon, a
        timeout or a check: those are recorded in the grade. A check that did
        not finish within its limit is that check failing; a request the
        daemon did not answer within its limit (the check's plus the margin)
        is an infrastructure error; a budget spent is an evaluator timeout.
    """
    result = Grade()
    try:
        _grade(api, deadline, say, result, prepared)
    except GradingTimeoutError as exc:
        result.timed_out = True
        result.fail(str(exc))
    except TaskBrokenError as exc:  # the reason for `error`, whatever failed before it
        result.task_broken = True
        result.notes.append(str(exc))
        result.error_msg, result.error_log = str(exc), exc.log
    except TimeoutError as exc:
        if deadline.spent():
            result.timed_out = True
            result.fail(
                f"the evaluator's time limit ({deadline.seconds:g} s) ran out "
                "while waiting for the daemon"
            )
        else:
            result.infrastructure_error = True
            result.fail(f"grading lost the daemon: {exc}")
    except (DaemonPatchDidNotApplyError, DaemonTreeUnreadableError, DaemonDiffTooLargeError) as exc:
        # Nothing the agent does turns `failed` into `error` (docs/integrity.md): a diff that
        # cannot be applied or read is the agent's, not the harness's.
        result.patch_refused = True
        result.fail(f"the agent's diff cannot be graded: {exc.detail}")
    except DaemonRefusedError as exc:
        result.infrastructure_error = True
        result.fail(str(exc))
    except (DaemonConnectionError, DaemonProtocolError, ConnectionError) as exc:
        result.infrastructure_error = True
        result.fail(f"grading lost the daemon: {exc}")
    say(f"grade: {result.patch_result().status}")
    return result


def _grade(
    api: GradingApi, deadline: Deadline, say: Say, result: Grade, prepared: Callable[[], None]
) -> None:
    caps = api.capabilities()
    left = count_checks(
        can_build=caps.can_build,
        can_run_poc=caps.can_run_poc,
        poc_count=caps.poc_count,
        has_function_test=caps.has_function_test,
        has_intent_test=caps.has_intent_test,
    )
    deadline.cover(left)
    say(
        f"task checks: build={caps.can_build} pocs={caps.poc_count} "
        f"function_test={caps.has_function_test} intent_test={caps.has_intent_test}; "
        f"budget {_seconds(deadline.seconds)}, "
        f"each check at most {_seconds(deadline.check_timeout)}"
    )
    diff = api.prepare_grading(timeout=deadline.prepare_limit())
    result.dropped = list(diff.dropped)
    say(f"prepare_grading: {diff.patch_bytes} bytes of diff applied")
    if diff.dropped:
        say(f"left out of the diff, as the task protects them: {', '.join(diff.dropped)}")
    prepared()

    def check(action: Action, poc: int | None = None) -> Checked:
        nonlocal left
        limit = deadline.check_limit(left)
        left -= 1
        request = BencherRequest(poc=poc, grading=True, timeout=limit)
        response = api.bencher(action, request, timeout=deadline.wait_limit(limit))
        say(
            f"{action}{'' if poc is None else f' {poc}'}: code {response.code}"
            + (f", stopped at its limit of {_seconds(limit)}" if response.timed_out else "")
        )
        if not response.runnable:  # nothing the agent's patch can cause: see BencherResponse
            raise TaskBrokenError(
                f"the task is broken: its {action} check cannot execute its script",
                output_log(response),
            )
        return Checked(response, limit)

    if caps.can_build:
        build = check("build")
        result.build_success = build.passed
        if not build.passed:
            result.fail(f"build failed: build.sh {_status(build)}", build.log())
            return
    if caps.can_run_poc and caps.poc_count > 0:
        passed = 0
        for index in range(caps.poc_count):
            poc = check("run_poc", index)
            which = f"PoC {index + 1} of {caps.poc_count}"
            if poc.passed:
                passed += 1
            elif poc.response.timed_out:
                result.fail(f"{which} {_status(poc)} (run.sh was stopped)", poc.log())
            else:
                result.fail(f"{which} still triggers the bug: run.sh {_status(poc)}", poc.log())
        result.pov_passed, result.pov_total = passed, caps.poc_count
    if caps.has_function_test:
        tests = check("function_test")
        result.func_test_success = tests.passed
        if not tests.passed:
            result.fail(f"function tests failed: test.sh {_status(tests)}", tests.log())
    if caps.has_intent_test:
        intent = check("intent_test")
        result.intent_test_success = intent.passed
        if not intent.passed:
            result.fail(
                f"intent tests failed: the hidden tests with test.sh {_status(intent)}",
                intent.log(),
            )
