"""The daemon's state and what each route does, shared by every listener.

Listeners differ only in privilege (`admin`): the HTTP layer passes it in and
this module decides what it allows (docs/agents.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Final

import msgspec

from ssebench.daemon._errors import (
    BadRequestError,
    ConflictError,
    ForbiddenError,
    InternalError,
    NotFoundError,
)
from ssebench.daemon._gate import ACTIONS, Action, allowed, task_has
from ssebench.daemon._messages import (
    AgentExitedResponse,
    BashRequest,
    BashResponse,
    BencherRequest,
    BencherResponse,
    CapabilitiesResponse,
    DiffResponse,
    FilesResponse,
    FinalDiffResponse,
    PrepareGradingResponse,
    ProjectResponse,
    PublicDescription,
    PublicScripts,
    ReferencePatchResponse,
    VersionResponse,
)
from ssebench.daemon._users import Identity, child_env, current_identity
from ssebench.daemon.server._checks import CheckRunner, Privileges
from ssebench.daemon.server._config import DaemonConfig
from ssebench.daemon.server._diff import DiffTaker
from ssebench.daemon.server._git import git_argv, git_env, make_git_dir
from ssebench.daemon.server._procs import read_as, run
from ssebench.daemon.server._results_log import ResultsLog
from ssebench.daemon.server._shell import Shell
from ssebench.daemon.server._sweep import close_dir
from ssebench.daemon.server._tree import remove_tree
from ssebench.spec import DecodeError, Result, TaskConfig, contract, read_json
from ssebench.spec.atomic import write_atomically

log = logging.getLogger("ssebench.daemon")

MAX_DIALOG_BYTES: Final = 64 << 20
"""Largest dialog.jsonl the daemon reads."""


def daemon_version() -> str:
    """The installed ssebench-daemon's version."""
    try:
        return metadata.version("ssebench-daemon")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _task_file(task_dir: Path, relative: str) -> Path:
    """A path from the task config, which must stay inside the task directory.

    Raises:
        InternalError: it does not.
    """
    path = Path(os.path.normpath(task_dir / relative))
    if not path.is_relative_to(task_dir) or path == task_dir:
        raise InternalError(f"the task config names a file outside {task_dir}: {relative!r}")
    return path


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


class Daemon:
    """Everything the listeners share: configuration, checks, the shell, the diff."""

    def __init__(
        self,
        *,
        config: DaemonConfig,
        task: TaskConfig,
        privileges: Privileges,
        environ: Mapping[str, str],
        git: str = "git",
    ) -> None:
        self.config = config
        self.task = task
        self.privileges = privileges
        self.environ = dict(environ)
        self.git = git
        self.source = Path(task.source)
        self.agent_phase_over = False
        self._report_fd = config.report_fd
        if self._report_fd is not None:
            # Passed to the daemon alone: none of the checks or shells it starts inherits it.
            os.set_inheritable(self._report_fd, False)
        self._agent_phase_cleared = asyncio.Event()
        """Set once what the agent phase leaves is cleared (`_clear_agent_phase`)."""
        self.final_patch: bytes | None = None
        self.dropped: list[str] = []
        """The protected paths left out of `final_patch`."""
        self._grading_lock = asyncio.Lock()
        self.differ = DiffTaker(
            source=self.source,
            repo=config.repo_dir,
            state_dir=config.state_dir,
            environ=self.environ,
            git=git,
            extra_env=privileges.extra_env,
            protected=task.protected_paths(),
        )
        self.results = ResultsLog(config.results_dir)
        self.checks = CheckRunner(
            config=config,
            task=task,
            privileges=privileges,
            results=self.results,
            agent_patch=self.differ.take,
            environ=self.environ,
            git=git,
        )
        shell_env = child_env(
            self.environ,
            privileges.model,
            keep=(contract.ENV_DAEMON_SOCKET, contract.ENV_ARCHIVE),
            extra=privileges.extra_env,
        )
        shell_env[contract.ENV_DAEMON_SOCKET] = str(config.agent_socket)
        self.shell = Shell(
            identity=privileges.model,
            cwd=self.source,
            env=shell_env,
            limit=config.max_stream_bytes,
        )
        self._project: ProjectResponse | None = None

    async def start(self) -> None:
        """Take the diff baseline and read the public project description.

        Call before any listener binds.

        Raises:
            InternalError: the baseline cannot be taken or a task file is missing.
        """
        baseline = await self.differ.snapshot()
        log.info("diff baseline taken: tree %s", baseline)
        self._project = self._load_project()

    async def close(self) -> None:
        """Stop the shell for good."""
        await self.shell.close()

    # -- reading -----------------------------------------------------------------

    def version(self) -> VersionResponse:
        """`GET /version`."""
        return VersionResponse(version=daemon_version())

    def _load_project(self) -> ProjectResponse:
        task, task_dir = self.task, self.config.task_dir
        reports = [
            _read_text(_task_file(task_dir, report))
            for report in task.task_description.crash_report
        ]
        scripts = task.scripts
        return ProjectResponse(
            id=task.id,
            project=task.project,
            language=task.language,
            source=task.source,
            task_description=PublicDescription(
                issue=task.task_description.issue,
                crash_report=reports,
                bug_description=task.task_description.bug_description,
            ),
            scripts=PublicScripts(
                build=_read_text(_task_file(task_dir, scripts.build)) if scripts.build else None,
                test=_read_text(_task_file(task_dir, scripts.test)) if scripts.test else None,
            ),
        )

    def project(self) -> ProjectResponse:
        """`GET /project`: public metadata only."""
        if self._project is None:
            self._project = self._load_project()
        return self._project

    def capabilities(self, *, admin: bool) -> CapabilitiesResponse:
        """`GET /capabilities`: what this listener allows and the task has."""
        may = allowed(None if admin else self.config.difficulty)

        def can(action: Action) -> bool:
            return action in may and task_has(self.task, action)

        return CapabilitiesResponse(
            can_build=can("build"),
            can_run_poc=can("run_poc"),
            poc_count=len(self.task.files.poc) if can("run_poc") else 0,
            has_function_test=can("function_test"),
            has_intent_test=can("intent_test"),
        )

    async def diff(self) -> DiffResponse:
        """`GET /diff`."""
        return DiffResponse(diff=(await self.differ.diff()).decode("utf-8", errors="replace"))

    async def files(self) -> FilesResponse:
        """`GET /files`."""
        return FilesResponse(files=await self.differ.files())

    def final_diff(self) -> FinalDiffResponse:
        """`GET /final_diff`.

        Raises:
            ConflictError: grading has not been prepared yet.
        """
        if self.final_patch is None:
            raise ConflictError("no final diff yet: grading has not been prepared")
        return FinalDiffResponse(diff=self.final_patch.decode("utf-8", errors="replace"))

    async def dialog(self, since: int) -> tuple[list[msgspec.Raw], int]:
        """`GET /agent/dialog`: entries of dialog.jsonl from `since` on (read as `model`).

        Raises:
            BadRequestError: `since` is negative.
            ConflictError: `model` may not read the file (e.g. a link to elsewhere).
            InternalError: reading it failed otherwise.
        """
        if since < 0:
            raise BadRequestError("'since' must be 0 or more")
        path = self.config.archive_dir / contract.DIALOG_FILE
        try:
            data = await read_as(self.privileges.model, path, limit=MAX_DIALOG_BYTES)
        except PermissionError as exc:
            raise ConflictError(
                f"dialog.jsonl cannot be read as {self.privileges.model.name}"
            ) from exc
        except OSError as exc:
            raise InternalError(str(exc)) from exc
        lines = [line for line in (data or b"").splitlines() if line.strip()]
        entries = []
        for line in lines[since:]:
            try:
                msgspec.json.decode(line)
            except msgspec.DecodeError:
                line = msgspec.json.encode(line.decode("utf-8", errors="replace"))
            entries.append(msgspec.Raw(line))
        return entries, len(lines)

    def result(self) -> Result:
        """`GET /result`: the grade, once the evaluator wrote it.

        Raises:
            NotFoundError: there is no grade yet.
            InternalError: result.json is unreadable.
        """
        path = self.config.results_dir / contract.RESULT_FILE
        if not path.is_file():
            raise NotFoundError("no grade yet: result.json has not been written")
        try:
            return read_json(path, Result)
        except DecodeError as exc:
            raise InternalError(f"result.json is not a valid grade: {exc}") from exc

    def reference_patch(self, *, admin: bool) -> ReferencePatchResponse:
        """`GET /reference/patch` (admin only, at all times).

        Raises:
            ForbiddenError: asked on an agent-facing listener.
        """
        self.require_admin(admin, "the reference patch")
        path = _task_file(self.config.task_dir, self.task.files.patch)
        return ReferencePatchResponse(diff=_read_text(path))

    # -- tools ---------------------------------------------------------------------

    def _tool_allowed(self, admin: bool) -> None:
        """The tool gate of agent-facing listeners: open during the agent phase only.

        Asked when a request's headers arrive, again once its body is read, and for
        a check when its turn comes and around every step, so no request that began
        before the phase ended acts after it (docs/integrity.md: no code of the agent runs
        after the agent phase except inside a check, as sse-runner).

        Raises:
            ForbiddenError: the agent phase is over (code `agent_phase_over`).
        """
        if not admin and self.agent_phase_over:
            raise ForbiddenError(
                "the agent phase is over: tools are refused", code="agent_phase_over"
            )

    @staticmethod
    def require_admin(admin: bool, what: str) -> None:
        """Refuse unless on the admin socket.

        Raises:
            ForbiddenError: on an agent-facing listener (code `admin_only`).
        """
        if not admin:
            raise ForbiddenError(f"{what} is for the admin socket only", code="admin_only")

    def check_bash(self, *, admin: bool, action: str | None) -> None:
        """Refuse a bash call before its body is read.

        Raises:
            ForbiddenError: the agent phase is over on an agent-facing listener.
            BadRequestError: an action other than `execute`.
        """
        self._tool_allowed(admin)
        if action not in (None, "execute"):
            raise BadRequestError(f"unknown action {action!r} for bash: its action is 'execute'")

    async def bash(self, request: BashRequest, *, admin: bool) -> BashResponse:
        """`POST /tool/bash`: one command in the persistent shell as `model` (after
        `check_bash` and the body).

        Raises:
            ForbiddenError: the agent phase is over (the shell never starts again then,
                not even for the admin socket).
            BadRequestError: a timeout that is not positive, or a NUL in the command.
            InternalError: bash cannot be started.
        """
        self._tool_allowed(admin)
        timeout = self.config.check_timeout if request.timeout is None else request.timeout
        if not timeout > 0:
            raise BadRequestError("'timeout' must be a positive number of seconds")
        try:
            output = await self.shell.execute(request.command, timeout=timeout)
        except ForbiddenError:
            raise  # the shell is closed (a PermissionError, not a failure to start bash)
        except OSError as exc:
            raise InternalError(f"cannot start bash: {exc}") from exc
        return BashResponse(
            code=output.code,
            stdout=output.stdout.text(),
            stderr=output.stderr.text(),
            truncated=output.truncated,
            timed_out=output.timed_out,
        )

    def check_bencher(self, *, admin: bool, action: str | None) -> Action:
        """Refuse a bencher call before its body is read.

        Returns:
            The action.

        Raises:
            ForbiddenError: agent phase over, or withheld by the difficulty.
            BadRequestError: a missing or unknown action.
        """
        self._tool_allowed(admin)
        if action not in ACTIONS:
            given = "no action" if action is None else f"unknown action {action!r}"
            raise BadRequestError(
                f"{given} for bencher: use ?action= with one of {', '.join(ACTIONS)}"
            )
        if action not in allowed(None if admin else self.config.difficulty):
            raise ForbiddenError(
                f"{action} is withheld at difficulty {self.config.difficulty}", code="withheld"
            )
        return action

    async def bencher(
        self, action: Action, request: BencherRequest, *, admin: bool
    ) -> BencherResponse:
        """`POST /tool/bencher`: one check (after `check_bencher`).

        Raises:
            ForbiddenError: `grading` asked for on an agent-facing listener, or the agent
                phase ended before the check ran or while it ran.
            NotFoundError: the task has no such check.
            BadRequestError: an unknown PoC.
            InternalError: the scratch copy failed.
        """
        self._tool_allowed(admin)
        if request.grading:
            self.require_admin(admin, "grading")
        gate = None if admin else (lambda: self._tool_allowed(admin))
        return await self.checks.run(action, request, gate=gate)

    # -- admin ---------------------------------------------------------------------

    async def agent_exited(
        self, *, admin: bool, exit_code: int | None = None
    ) -> AgentExitedResponse:
        """`POST /admin/agent_exited`: end the agent phase; idempotent.

        A report of how the agent's process ended (`exit_code`, from the backend, whose
        agent container ended) is handed to the entrypoint and ends nothing: the
        entrypoint runs the `after-agent` plugins (as model, writing into the archive)
        and then ends the phase with this route, without a status, as after an agent
        it ran itself.

        Raises:
            ForbiddenError: asked on an agent-facing listener.
        """
        self.require_admin(admin, "ending the agent phase")
        if exit_code is not None:
            self._report_exit(exit_code)
            return AgentExitedResponse(success=True, killed=0)
        killed = await self._end_agent_phase()
        return AgentExitedResponse(success=True, killed=killed)

    def _report_exit(self, exit_code: int) -> None:
        """Write the first report to the entrypoint's pipe as one JSON line, then close it."""
        fd, self._report_fd = self._report_fd, None
        if fd is None:
            return
        try:
            os.write(fd, msgspec.json.encode({"exit_code": exit_code}) + b"\n")
        except OSError as exc:
            log.warning("cannot report the agent's exit to the entrypoint: %s", exc)
        finally:
            os.close(fd)

    async def agent_phase_cleared(self) -> None:
        """Return once what the agent phase left is cleared (its checks' processes too).

        A refusal because the phase is over is answered only then: the answer is how
        the agent's code learns the phase ended, and none of it may still run by then.
        """
        await self._agent_phase_cleared.wait()

    async def _end_agent_phase(self) -> int:
        self.agent_phase_over = True
        try:
            await self.shell.close()
            killed = await self.privileges.killer.kill_all(self.privileges.model)
            log.info("agent phase over: %d model processes killed", killed)
            await self._clear_agent_phase()
        finally:
            self._agent_phase_cleared.set()  # also on failure: refusals must not hang
        return killed

    async def _clear_agent_phase(self) -> None:
        """What the agent phase leaves, once every `model` process is gone.

        Rules enforced (docs/integrity.md): no code of the agent runs after the agent
        phase except inside a check, as sse-runner — a check the agent asked for is
        stopped (its sse-runner processes killed) before this returns; sse-runner
        cannot reach the archive — the archive's top folder becomes root:model
        0750 through a descriptor (model, and the daemon reading dialog.jsonl as
        model, still may; hand-over gives it to the host's user), and the source
        tree's top loses every right of others, so no grading check can leave
        files where they would reach the host (`archive/`, `source.tar.gz`);
        what the agent left in shared writable places is gone before grading —
        model's and sse-runner's files in /tmp, /var/tmp, /dev/shm, /run/lock and
        /dev/mqueue (not the archive, source tree or home) and their IPC objects.
        """
        if await self.checks.stop_agent_check():
            log.info("agent phase over: the check the agent asked for was stopped")
        model = self.privileges.model
        closing = (
            (self.config.archive_dir, 0, model.gid, 0o750),
            (self.source, model.uid, model.gid, 0o750),
        )
        for path, uid, gid, mode in closing:
            problem = await asyncio.to_thread(close_dir, path, uid=uid, gid=gid, mode=mode)
            if problem is not None:
                log.warning("agent phase over: not closed to others: %s", problem)
        removed = await self.checks.sweeper.after_agent()
        if removed:
            shown = ", ".join(removed[:20]) + (", ..." if len(removed) > 20 else "")
            log.info("agent phase over: removed %d leftovers: %s", len(removed), shown)

    async def prepare_grading(self, *, admin: bool) -> PrepareGradingResponse:
        """`POST /prepare_grading`: the agent phase ended (if it was not), a fresh check
        session, final.patch and commits.log written, the diff applied to `/ssebench-repo`.
        The agent's changes to the task's protected paths are in neither (`_diff`); the
        answer lists them. A second call answers the same.

        Integrity rule (docs/integrity.md): no code the agent wrote or configured runs
        after the agent phase; `model` is killed again after every step that could
        start its code. Taking the diff and the history runs git as `model` (on
        private git directories, see `_diff` and `_history`), so every `model`
        process is killed once more when this returns, whatever happened.

        Raises:
            ForbiddenError: asked on an agent-facing listener.
            ConflictError: the diff does not apply (code `patch_did_not_apply`), or the
                agent closed its own tree to itself (code `tree_unreadable`).
            InternalError: git failed or a file cannot be written.
        """
        self.require_admin(admin, "preparing grading")
        async with self._grading_lock:
            if self.final_patch is not None:
                return PrepareGradingResponse(
                    success=True, patch_bytes=len(self.final_patch), dropped=self.dropped
                )
            try:
                if not self.agent_phase_over:
                    # Nothing of the agent may change the tree while (or after) it is graded.
                    await self._end_agent_phase()
                # An agent_exited still at work (stopping a check) finishes before grading.
                await self._agent_phase_cleared.wait()
                await self.checks.reset()
                taken = await self.differ.take()
                patch = taken.patch
                results = self.config.results_dir
                results.mkdir(mode=0o700, parents=True, exist_ok=True)
                write_atomically(results / "final.patch", patch)
                commits = await self.differ.commits_log()
                write_atomically(results / "commits.log", commits.encode("utf-8", errors="replace"))
                if patch:
                    await self._apply_to_repo(results / "final.patch")
            finally:
                survivors = await self.privileges.killer.kill_all(self.privileges.model)
                if survivors:
                    log.warning("prepare_grading: %d model processes found and killed", survivors)
            self.checks.repo_patched = True
            self.final_patch, self.dropped = patch, taken.dropped
            log.info(
                "grading prepared: %d bytes of diff applied, %d protected paths left out",
                len(patch),
                len(taken.dropped),
            )
            return PrepareGradingResponse(
                success=True, patch_bytes=len(patch), dropped=taken.dropped
            )

    async def _apply_to_repo(self, patch: Path) -> None:
        """`git apply` the agent's diff to /ssebench-repo, as root, on a private git
        directory: no configuration, attribute or filter of the project's own `.git`
        or `.gitattributes` changes what is written (the diff was taken the same way),
        and git apply refuses paths through links and out of the tree.

        Raises:
            ConflictError: it does not apply (code `patch_did_not_apply`).
        """
        root = _root_or_self()
        state = self.config.state_dir
        work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="apply-", dir=state))
        try:
            await asyncio.to_thread(make_git_dir, work / "git")
            output = await run(
                git_argv(self.git, "apply", "--binary", "--whitespace=nowarn", str(patch)),
                identity=root,
                cwd=self.config.repo_dir,
                env=git_env(
                    self.environ, root, git_dir=work / "git", work_tree=self.config.repo_dir
                ),
                timeout=600,
                limit=self.config.max_stream_bytes,
            )
        finally:
            await remove_tree(work)
        write_atomically(
            self.config.results_dir / "prepare_grading.log",
            f"$ git apply --binary final.patch (in {self.config.repo_dir})\n"
            f"# exit code {output.code}\n{output.stdout.text()}{output.stderr.text()}".encode(),
        )
        if output.code != 0:
            detail = output.stderr.text().strip()
            raise ConflictError(
                f"patch did not apply to {self.config.repo_dir}: {detail}",
                code="patch_did_not_apply",
            )


def _root_or_self() -> Identity:
    """The daemon's own user (root in a container)."""
    return current_identity()
