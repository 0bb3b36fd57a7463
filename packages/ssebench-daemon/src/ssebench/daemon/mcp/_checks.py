"""What `test_patch` does, without the MCP SDK: run the allowed checks, describe the outcome.

Over the agent-facing socket it runs what the difficulty allows and the task
has, in this order: build (a failure stops everything), the PoCs (stopping
at the first that still triggers), the intent tests, the function tests. The
answer is plain text written for an agent: a verdict, one line per check,
and the failing output, cut to its tail with the full log saved to a file
the agent can read.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Protocol

from ssebench.daemon._client import DaemonUnreachableError
from ssebench.daemon._client._api import DaemonProtocolError, DaemonRefusedError
from ssebench.daemon._gate import ALLOWED, Action
from ssebench.daemon._messages import BencherRequest, BencherResponse, CapabilitiesResponse

TAIL_CHARS: Final = 4000
"""Characters of a failing check's output shown in the answer (its end)."""

Outcome = Literal["passed", "failed", "not run", "refused"]


class AgentApi(Protocol):
    """The agent-facing routes `test_patch` needs (`DaemonApi`; fakes in tests)."""

    def capabilities(self) -> CapabilitiesResponse:
        """`GET /capabilities`."""
        ...

    def bencher(
        self, action: Action, request: BencherRequest, *, timeout: float | None
    ) -> BencherResponse:
        """`POST /tool/bencher?action=…`."""
        ...


class LogStore:
    """Full logs of failing checks, in a root-owned directory the agent can read.

    The directory is made fresh (a random name, before the agent starts) and
    only root writes in it; every file is created with O_EXCL|O_NOFOLLOW.
    """

    def __init__(self, parent: Path | None = None) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="ssebench-mcp-", dir=parent))
        self.directory.chmod(0o755)
        self._count = 0

    def save(self, label: str, text: str) -> Path:
        """Write one log; returns its path.

        Raises:
            OSError: it cannot be written.
        """
        self._count += 1
        slug = "".join(c if c.isalnum() else "-" for c in label.lower()).strip("-")
        path = self.directory / f"{self._count:03d}-{slug}.log"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as file:
            file.write(text)
        return path


@dataclass
class Step:
    """One line of the answer."""

    label: str
    outcome: Outcome
    detail: str = ""
    output: str | None = None
    """The failing check's output (stdout and stderr), if it failed."""


def _output(response: BencherResponse) -> str:
    parts = []
    if response.stdout:
        parts.append(f"--- stdout ---\n{response.stdout.rstrip()}")
    if response.stderr:
        parts.append(f"--- stderr ---\n{response.stderr.rstrip()}")
    if response.truncated:
        parts.append("(the daemon kept only the first MiB of each stream)")
    return "\n".join(parts) or "(no output)"


def _exit(response: BencherResponse, script: str) -> str:
    if response.timed_out:
        return f"{script} was stopped at the check's time limit"
    return f"{script} exited with status {response.code}"


class PatchTester:
    """Runs `test_patch`: the checks the difficulty allows, over the agent-facing socket."""

    def __init__(
        self,
        api: AgentApi,
        *,
        difficulty: int,
        logs: LogStore,
        check_timeout: float | None = None,
    ) -> None:
        self.api = api
        self.difficulty = difficulty
        self.allowed = ALLOWED[difficulty]
        self.logs = logs
        self.timeout = None if check_timeout is None else check_timeout + 120.0

    def run(self) -> str:
        """Run the checks and describe the outcome for the agent.

        Returns:
            The answer (never raises: a daemon that cannot be reached is described too).
        """
        if not self.allowed:
            return (
                f"NOTHING CHECKED: at this run's difficulty ({self.difficulty}) nothing may be "
                "checked. test_patch cannot build, run the proofs of concept or run any tests "
                "for you here; review your change yourself and finish when you are confident."
            )
        try:
            caps = self.api.capabilities()
            steps = self._steps(caps)
        except (DaemonUnreachableError, DaemonProtocolError, DaemonRefusedError) as exc:
            return f"ERROR: test_patch could not reach the SSEBench daemon: {exc}"
        except (ConnectionError, TimeoutError, OSError) as exc:
            return f"ERROR: test_patch lost the SSEBench daemon while checking: {exc}"
        return self._describe(steps)

    # -- running --------------------------------------------------------------------

    def _may(self, action: Action, has: bool) -> bool:
        return action in self.allowed and has

    def _steps(self, caps: CapabilitiesResponse) -> list[Step]:
        steps: list[Step] = []
        plan_pocs = self._may("run_poc", caps.can_run_poc) and caps.poc_count > 0
        plan_intent = self._may("intent_test", caps.has_intent_test)
        plan_function = self._may("function_test", caps.has_function_test)
        if self._may("build", caps.can_build):
            build = self._check("build", BencherRequest(), "build")
            steps.append(build)
            if build.outcome != "passed":
                skipped = "not run: the build did not pass"
                if plan_pocs:
                    steps.append(Step("proofs of concept", "not run", skipped))
                if plan_intent:
                    steps.append(Step("intent tests", "not run", skipped))
                if plan_function:
                    steps.append(Step("function tests", "not run", skipped))
                return steps
        if plan_pocs:
            for index in range(caps.poc_count):
                label = f"PoC {index + 1} of {caps.poc_count}"
                step = self._check("run_poc", BencherRequest(poc=index), label)
                steps.append(step)
                if step.outcome != "passed":
                    rest = caps.poc_count - index - 1
                    if rest:
                        steps.append(
                            Step(
                                f"PoC {index + 2}-{caps.poc_count} of {caps.poc_count}"
                                if rest > 1
                                else f"PoC {caps.poc_count} of {caps.poc_count}",
                                "not run",
                                "stopped at the first PoC that still triggers",
                            )
                        )
                    break
        if plan_intent:
            steps.append(self._check("intent_test", BencherRequest(), "intent tests"))
        if plan_function:
            steps.append(self._check("function_test", BencherRequest(), "function tests"))
        return steps

    def _check(self, action: Action, request: BencherRequest, label: str) -> Step:
        try:
            response = self.api.bencher(action, request, timeout=self.timeout)
        except DaemonRefusedError as exc:
            if exc.status in (403, 404):
                return Step(label, "refused", exc.detail)
            raise
        if response.code == 0:
            return Step(label, "passed")
        if action == "build":
            detail = f"the build failed: {_exit(response, 'build.sh')}"
        elif action == "run_poc":
            detail = f"the bug still triggers: {_exit(response, 'run.sh')}"
        elif action == "intent_test":
            detail = f"the hidden intent tests failed: {_exit(response, 'test.sh')}"
        else:
            detail = f"the project's tests failed: {_exit(response, 'test.sh')}"
        return Step(label, "failed", detail, _output(response))

    # -- describing -------------------------------------------------------------------

    def _describe(self, steps: list[Step]) -> str:
        if not steps:
            return (
                "NOTHING CHECKED: this task has no check you may run at this run's difficulty "
                f"({self.difficulty})."
            )
        ran = [step for step in steps if step.outcome in ("passed", "failed")]
        failed = [step for step in steps if step.outcome == "failed"]
        refused = [step for step in steps if step.outcome == "refused"]
        if failed:
            verdict = f"FAILED: {len(failed)} of {len(ran)} checks that ran failed."
        elif not ran:
            verdict = "NOTHING CHECKED: the daemon refused every check."
        else:
            verdict = f"PASSED: all {len(ran)} checks that ran passed."
            if refused:
                verdict += " Some checks were refused (see below)."
        lines = [f"test_patch: {verdict}", ""]
        for step in steps:
            line = f"- {step.label}: {step.outcome.upper()}"
            lines.append(f"{line} ({step.detail})" if step.detail else line)
        if len(self.allowed) < 4:
            withheld = sorted(
                {"build", "run_poc", "function_test", "intent_test"} - set(self.allowed)
            )
            names = ", ".join(_ACTION_NAMES[action] for action in withheld)
            lines.append(f"- not available at difficulty {self.difficulty}: {names}")
        for step in failed:
            assert step.output is not None
            lines += ["", *self._output_block(step)]
        return "\n".join(lines) + "\n"

    def _output_block(self, step: Step) -> list[str]:
        text = step.output or ""
        if len(text) <= TAIL_CHARS:
            return [f"== {step.label}: output ==", text]
        where = "could not be saved"
        with contextlib.suppress(OSError):
            where = f"full log: {self.logs.save(step.label, text)}"
        return [
            f"== {step.label}: output, last {TAIL_CHARS} of {len(text)} characters ({where}) ==",
            text[-TAIL_CHARS:],
        ]


_ACTION_NAMES: Final[dict[str, str]] = {
    "build": "build",
    "run_poc": "proofs of concept",
    "function_test": "function tests",
    "intent_test": "intent tests",
}
