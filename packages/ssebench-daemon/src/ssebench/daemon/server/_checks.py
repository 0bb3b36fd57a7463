"""Running checks as `sse-runner` in fresh scratch copies, one at a time.

For every check root makes `<scratch>/check-<n>/` (root:sse-runner 0710) with
`src/` (a copy of the project owned by sse-runner), `home/` and `tmp/` (the
runner's private HOME and TMPDIR) and `stage/` (root:sse-runner 0750), where
root stages the hidden material the check needs just before it runs. During
the agent phase the copy is the pristine project with the agent's diff
applied (as sse-runner); a grading check (and every check once
`prepare_grading` applied the final diff to `/ssebench-repo`) copies
`/ssebench-repo` as it is; no copy carries `.git` (docs/integrity.md: a scratch
copy never carries `.git` history, which may hold the fix). The script a check
runs is a copy staged with its support files, and a PoC with its folder
(`_stage`), so the check sees
nothing of /ssebench but what it needs. After every check each sse-runner
process is killed, `stage/` removed, and the shared writable places swept of
what sse-runner left or wrote (`_sweep`); the copy is removed too, except the
last build's, where `run_poc` runs.

A check the agent asked for stops when the agent phase ends: the gate is
asked again when the check's lock is taken and before and after every step,
and `stop_agent_check` kills sse-runner until the check has cleaned up.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from ssebench.daemon._errors import BadRequestError, InternalError, NotFoundError
from ssebench.daemon._gate import Action, task_has
from ssebench.daemon._messages import BencherRequest, BencherResponse
from ssebench.daemon._users import Identity, child_env
from ssebench.daemon.server._config import DaemonConfig
from ssebench.daemon.server._diff import TakenDiff
from ssebench.daemon.server._procs import CappedBuffer, ProcessKiller, RunOutput, run
from ssebench.daemon.server._results_log import CheckLog, ResultsLog
from ssebench.daemon.server._stage import Stage, StageError, named_files
from ssebench.daemon.server._sweep import SHARED_DIRS, Sweeper
from ssebench.daemon.server._tree import copy_tree, remove_tree
from ssebench.spec import TaskConfig
from ssebench.spec.protected import listed

log = logging.getLogger("ssebench.daemon")

NEVER_COPIED: Final = (".git",)
"""Names left out of every scratch copy, at any depth (git history may hold the fix)."""

Gate = Callable[[], None]
"""Raises `ForbiddenError` once the caller may no longer run checks (the agent phase ended)."""

ISOLATED_GIT_ENV: Final = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}
"""Environment that keeps git away from system and user configuration."""


@dataclass(frozen=True)
class Privileges:
    """Who runs what, and how their processes are killed; tests pass fakes."""

    model: Identity
    runner: Identity
    killer: ProcessKiller
    extra_env: Mapping[str, str] = field(default_factory=dict)
    sweep_dirs: Sequence[str] = SHARED_DIRS


@dataclass
class _Copy:
    number: int
    root: Path
    grading: bool

    @property
    def src(self) -> Path:
        return self.root / "src"


class _Check:
    """One check in progress: its directory, deadline, log and collected outputs."""

    def __init__(
        self,
        runner: CheckRunner,
        number: int,
        log: CheckLog,
        timeout: float,
        limit_name: str = "the limit SSE_CHECK_TIMEOUT",
    ) -> None:
        self.runner = runner
        self.number = number
        self.log = log
        self.root = runner.config.scratch_dir / f"check-{number:04d}"
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.limit_name = limit_name
        self.gate: Gate | None = None
        """The agent's gate, for a check the agent asked for (None: the admin's)."""
        self.stage = Stage(
            self.root / "stage", runner.privileges.runner.gid if os.geteuid() == 0 else None
        )
        self.started_ns = time.time_ns()
        self.dropped: list[str] = []
        """Protected paths the agent changed, left out of the diff this check applied."""

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def env(self) -> dict[str, str]:
        priv = self.runner.privileges
        env = child_env(self.runner.environ, priv.runner, extra=priv.extra_env)
        env.update(ISOLATED_GIT_ENV)
        env.update(HOME=str(self.root / "home"), TMPDIR=str(self.root / "tmp"))
        return env

    def check_gate(self) -> None:
        """Raise `ForbiddenError` when the agent phase ended under an agent's check."""
        if self.gate is not None:
            self.gate()

    async def step(self, label: str, argv: Sequence[str], cwd: Path) -> RunOutput:
        """Run one command as sse-runner, within what is left of the time limit.

        Raises:
            ForbiddenError: the agent phase ended before or while it ran (an agent's check).
        """
        runner = self.runner
        self.check_gate()
        if self.remaining() <= 0:
            output = _daemon_output(argv, "the check's time limit was reached", runner.limit)
            output.timed_out = True
        else:
            try:
                output = await run(
                    argv,
                    identity=runner.privileges.runner,
                    cwd=cwd,
                    env=self.env(),
                    timeout=self.remaining(),
                    limit=runner.limit,
                    umask=0o077,
                )
            except OSError as exc:
                output = _daemon_output(argv, f"cannot start: {exc.strerror or exc}", runner.limit)
                output.runnable = exc.filename != argv[0]  # the program, not the cwd or a fork
        if output.timed_out:
            output.code = -1
            output.stderr.write(
                f"\nssebench: check stopped after {self.timeout:g} s ({self.limit_name})\n".encode()
            )
        self.log.command(label, output)
        self.check_gate()
        return output


def check_limit(requested: float | None, ceiling: float) -> tuple[float, str]:
    """A check's time limit and how its answer names it: the request's `timeout` when
    shorter than `SSE_CHECK_TIMEOUT` (`ceiling`), else `SSE_CHECK_TIMEOUT`.

    A request may only shorten its check, on any listener: the evaluator sends each
    grading check its share of the grading budget, so that a check that hangs is
    stopped here, answered and recorded as that check failing, while the evaluator
    still has time for the rest (docs/integrity.md: nothing the agent does turns `failed`
    into `error`).

    Raises:
        BadRequestError: a `timeout` that is not a positive number of seconds.
    """
    if requested is None:
        return ceiling, "the limit SSE_CHECK_TIMEOUT"
    if not requested > 0:
        raise BadRequestError("'timeout' must be a positive number of seconds")
    if requested < ceiling:
        return requested, "the time limit of this request"
    return ceiling, "the limit SSE_CHECK_TIMEOUT"


def _daemon_output(argv: Sequence[str], message: str, limit: int) -> RunOutput:
    out, err = CappedBuffer(limit), CappedBuffer(limit)
    err.write(f"ssebench: {message}\n".encode())
    return RunOutput(argv=list(argv), code=-1, stdout=out, stderr=err)


def _noting_dropped(response: BencherResponse, dropped: list[str]) -> BencherResponse:
    """The answer, telling the agent which of its changes the check left out."""
    if not dropped:
        return response
    note = (
        f"ssebench: your changes to protected paths were left out, as grading leaves them "
        f"out: {listed(dropped, 20)}\n"
    )
    return msgspec.structs.replace(response, stderr=response.stderr + note)


def _response(output: RunOutput, *, note: str | None = None) -> BencherResponse:
    stderr = output.stderr.text()
    if note:
        stderr = f"{stderr}{'' if not stderr or stderr.endswith(chr(10)) else chr(10)}{note}\n"
    return BencherResponse(
        code=output.code,
        stdout=output.stdout.text(),
        stderr=stderr,
        truncated=output.truncated,
        timed_out=output.timed_out,
        runnable=output.runnable,
    )


AgentPatch = Callable[[], Awaitable[TakenDiff]]
"""Returns the agent's current diff (binary git diff against the initial commit), without
its changes to protected paths."""


class CheckRunner:
    """Runs bencher actions; one at a time."""

    def __init__(
        self,
        *,
        config: DaemonConfig,
        task: TaskConfig,
        privileges: Privileges,
        results: ResultsLog,
        agent_patch: AgentPatch,
        environ: Mapping[str, str],
        git: str = "git",
    ) -> None:
        self.config = config
        self.task = task
        self.privileges = privileges
        self.results = results
        self.agent_patch = agent_patch
        self.environ = environ
        self.git = git
        self.limit = config.max_stream_bytes
        self.lock = asyncio.Lock()
        self._last_build: _Copy | None = None
        self._current: _Check | None = None
        self.named = named_files(task)
        self.sweeper = Sweeper(
            shared=privileges.sweep_dirs,
            agent_trees=(task.source, privileges.model.home, str(config.archive_dir)),
            model=privileges.model,
            runner=privileges.runner,
        )
        self.repo_patched = False
        """Whether `prepare_grading` applied the agent's diff to the project: from then on
        every check starts from the project as it is."""

    async def reset(self) -> None:
        """Start a fresh check session: kill the runner's processes, forget every copy."""
        async with self.lock:
            await self._kill_runner()
            self._last_build = None
            if self.config.scratch_dir.is_dir():
                for entry in self.config.scratch_dir.iterdir():
                    await remove_tree(entry)

    async def run(
        self, action: Action, request: BencherRequest, *, gate: Gate | None = None
    ) -> BencherResponse:
        """Run one action (the caller checked who may ask for grading).

        Args:
            action: the check.
            request: its options.
            gate: for a check the agent asked for, its tool gate: asked again once the
                check's turn comes and before and after each step (None: the admin's).

        Raises:
            ForbiddenError: the agent phase ended before the check's turn or while it ran.
            NotFoundError: the task has no such check.
            BadRequestError: an unknown PoC, or a `timeout` that is not positive.
            InternalError: the scratch copy could not be made.
        """
        if not task_has(self.task, action):
            raise NotFoundError(f"this task has no {action} check", code="not_found")
        pocs = self._select_pocs(request.poc) if action == "run_poc" else []
        limit = check_limit(request.timeout, self.config.check_timeout)
        async with self.lock:
            if gate is not None:
                gate()
            number, log = self.results.next(action)
            check = _Check(self, number, log, *limit)
            check.gate = gate
            log.note(f"{action} (grading: {str(request.grading).lower()})")
            keep = False
            self._current = check
            try:
                await self._kill_runner()
                await self._make_dirs(check)
                if action == "run_poc":
                    return await self._run_poc(check, pocs, grading=request.grading)
                response, keep = await self._run_in_copy(check, action, grading=request.grading)
                return _noting_dropped(response, check.dropped)
            except StageError as exc:
                log.note(f"cannot stage what the check needs: {exc}")
                return BencherResponse(code=-1, stdout="", stderr=f"ssebench: {exc}\n")
            finally:
                try:
                    await self._clean_up(check, keep=keep)
                finally:
                    self._current = None

    async def stop_agent_check(self) -> bool:
        """Stop a check the agent asked for, if one runs (its gate must refuse by now): kill
        sse-runner until the check has cleaned up.

        Returns:
            Whether one was running.
        """
        check = self._current
        if check is None or check.gate is None:
            return False
        while self._current is check:
            await self._kill_runner()
            await asyncio.sleep(0.05)
        return True

    # -- the actions -------------------------------------------------------------

    async def _run_in_copy(
        self, check: _Check, action: Action, *, grading: bool
    ) -> tuple[BencherResponse, bool]:
        if action == "build" and self._last_build is not None:
            await remove_tree(self._last_build.root)
            self._last_build = None
        failed = await self._fresh_copy(check, grading=grading)
        if failed is not None:
            return failed, False
        src = check.root / "src"
        scripts = self.task.scripts
        if action == "build":
            assert scripts.build is not None
            output = await check.step("build", await self._stage_script(check, scripts.build), src)
            self._last_build = _Copy(check.number, check.root, grading or self.repo_patched)
            return _response(output), True
        if action == "intent_test":
            future = self.task.files.future_test
            assert future is not None
            staged = await asyncio.to_thread(
                check.stage.copy, self.config.task_dir / future, "test.diff"
            )
            applied = await check.step(
                "apply the hidden tests", [self.git, "apply", "-p1", str(staged)], src
            )
            check.stage.discard("test.diff")
            if applied.code != 0:
                note = "ssebench: the hidden tests do not apply to this tree"
                return _response(applied, note=note), False
        assert scripts.test is not None
        output = await check.step("test", await self._stage_script(check, scripts.test), src)
        return _response(output), False

    async def _run_poc(self, check: _Check, pocs: list[str], *, grading: bool) -> BencherResponse:
        build = self._last_build
        if build is None or build.grading != (grading or self.repo_patched):
            check.log.note("nothing was built")
            return BencherResponse(
                code=-1,
                stdout="",
                stderr="ssebench: nothing was built: run the build action first\n",
            )
        check.log.note(f"in the copy of check {build.number}")
        assert self.task.scripts.run is not None
        script = await self._stage_script(check, self.task.scripts.run)
        outputs: list[tuple[str, RunOutput]] = []
        for index, poc in enumerate(pocs):
            place = f"poc-{index}"
            staged = await asyncio.to_thread(
                check.stage.poc, self.config.task_dir, poc, self.named, place
            )
            output = await check.step(f"poc {poc}", [*script, str(staged)], build.src)
            # The next PoC must not see this one (root's stage: sse-runner cannot hold it).
            await remove_tree(check.stage.path / place)
            outputs.append((poc, output))
            if output.timed_out:
                break
        if len(outputs) == 1:
            return _response(outputs[0][1])
        code = next((out.code for _, out in outputs if out.code != 0), 0)
        stdout = "".join(
            f"== PoC {n} ==\n{out.stdout.text()}" for n, (_, out) in enumerate(outputs)
        )
        stderr = "".join(
            f"== PoC {n} ==\n{out.stderr.text()}" for n, (_, out) in enumerate(outputs)
        )
        return BencherResponse(
            code=code,
            stdout=stdout,
            stderr=stderr,
            truncated=any(out.truncated for _, out in outputs),
            timed_out=any(out.timed_out for _, out in outputs),
            runnable=all(out.runnable for _, out in outputs),
        )

    def _select_pocs(self, poc: str | int | None) -> list[str]:
        listed = self.task.files.poc
        if poc is None:
            return list(listed)
        if isinstance(poc, int):
            if 0 <= poc < len(listed):
                return [listed[poc]]
            raise BadRequestError(f"no PoC number {poc}: this task has {len(listed)} (from 0)")
        if poc in listed:
            return [poc]
        raise BadRequestError(
            "unknown PoC: give its path from the task config or its index "
            f"(0 to {len(listed) - 1}), or leave 'poc' out to run them all"
        )

    # -- the copy ------------------------------------------------------------------

    async def _make_dirs(self, check: _Check) -> None:
        runner = self.privileges.runner
        root = check.root
        await remove_tree(root)
        self.config.scratch_dir.mkdir(mode=0o710, parents=True, exist_ok=True)
        root.mkdir(mode=0o710)
        (root / "stage").mkdir(mode=0o750)
        (root / "home").mkdir(mode=0o700)
        (root / "tmp").mkdir(mode=0o700)
        if os.geteuid() == 0:
            os.chown(root, 0, runner.gid)
            os.chown(root / "stage", 0, runner.gid)
            os.chown(root / "home", runner.uid, runner.gid)
            os.chown(root / "tmp", runner.uid, runner.gid)

    async def _fresh_copy(self, check: _Check, *, grading: bool) -> BencherResponse | None:
        """Make `src/` (without `.git`); None when ready, else the answer explaining why not."""
        runner = self.privileges.runner
        owner = (runner.uid, runner.gid) if os.geteuid() == 0 else None
        try:
            await copy_tree(
                self.config.repo_dir,
                check.root / "src",
                owner=owner,
                skip=NEVER_COPIED,
            )
        except OSError as exc:
            check.log.note(f"the scratch copy failed: {exc}")
            raise InternalError(f"cannot make the scratch copy: {exc}") from exc
        if grading or self.repo_patched:
            return None
        taken = await self.agent_patch()
        if taken.dropped:
            check.dropped = taken.dropped
            check.log.note(f"protected paths left out of the diff: {', '.join(taken.dropped)}")
        patch = taken.patch
        if not patch:
            check.log.note("the agent's diff is empty")
            return None
        staged = check.stage.write(patch, "agent.patch")
        applied = await check.step(
            "apply the agent's diff",
            [self.git, "apply", "--binary", "--whitespace=nowarn", str(staged)],
            check.root / "src",
        )
        check.stage.discard("agent.patch")
        if applied.code == 0:
            return None
        return _response(applied, note="ssebench: your diff does not apply to the pristine project")

    async def _stage_script(self, check: _Check, relative: str) -> list[str]:
        """Stage a task script with its support files; the command that runs the copy."""
        return await asyncio.to_thread(
            check.stage.script, self.config.task_dir, relative, self.named
        )

    # -- cleaning up ---------------------------------------------------------------

    async def _kill_runner(self) -> None:
        await self.privileges.killer.kill_all(self.privileges.runner)

    async def _clean_up(self, check: _Check, *, keep: bool) -> None:
        """After a check: no sse-runner process, no stage, nothing of it in shared places.

        Every process goes first, so none outlives the stage or sees the sweep; the
        sweep then removes what sse-runner left or wrote in shared places since the
        check began, before the agent's next command.
        """
        await self._kill_runner()
        await remove_tree(check.root / "stage" if keep else check.root)
        removed = await self.sweeper.after_check(check.started_ns)
        if removed:
            shown = ", ".join(removed[:20]) + (", ..." if len(removed) > 20 else "")
            check.log.note(f"removed what the check left in shared places: {shown}")
            log.info("check %d: %d leftovers in shared places removed", check.number, len(removed))
