"""One container run, as PID 1: services, agent phase, grading, hand-over, marker.

Phases (docs/architecture.md, container side):
1. prepare the results and archive directories; start the daemon and the MCP
   server side by side and wait until both answer;
2. run the agent command as `model` (`_agent`);
3. end the agent phase: every `model` process killed, the daemon told;
4. run the evaluator (it writes `result.json`), hand the results' files to
   the owner of the host's run directory, write the `.graded` marker, and
   exit with the agent's status (or stay up with `SSE_KEEP_ALIVE=1`).

A stop signal at any point ends the phase in progress, records the reason in
`result.json` unless a grade is already there, and exits 128+N (143 for SIGTERM).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import socket
import subprocess
import time
import traceback
from typing import Final

from ssebench.daemon._budget import count_checks
from ssebench.daemon._client import DaemonUnreachableError, UnixHTTPClient
from ssebench.daemon._pids import PidsWatchdog, run_users
from ssebench.daemon._users import kill_user, lower_own_oom_score, signal_group
from ssebench.daemon.entrypoint._agent import AgentOutcome, Relay, run_agent
from ssebench.daemon.entrypoint._files import (
    hand_over,
    log_tail,
    open_log,
    prepare_archive,
    prepare_results,
    write_marker,
)
from ssebench.daemon.entrypoint._plugins import Plugins
from ssebench.daemon.entrypoint._procs import Children, Wakeup
from ssebench.daemon.entrypoint._services import (
    ServiceError,
    Services,
    StopRequestedError,
    service_env,
)
from ssebench.daemon.entrypoint._settings import Settings
from ssebench.spec import contract

START_FAILED: Final = 2
"""Exit status when the run could not start (bad settings, a service did not come up)."""

CRASHED: Final = 1
"""Exit status when the entrypoint itself failed (its traceback is in entrypoint.log)."""

AGENT_EXITED_TIMEOUT: Final = 60.0
"""Seconds the daemon gets to end the agent phase (it kills every `model` process)."""

AGENT_EXITED_STOPPING: Final = 5.0
"""The same after a stop signal, when the whole stop must fit in the 20 s grace."""


PREPARE_WAIT: Final = 600.0
"""Seconds `before-grading` plugins wait for the daemon to take the agent's diff."""


def _reported_status(line: bytes) -> int | None:
    """The exit status in the daemon's report (`{"exit_code": N}`), or None if unreadable."""
    try:
        code = json.loads(line.split(b"\n", 1)[0]).get("exit_code")
    except (ValueError, AttributeError):
        return None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


class Entrypoint:
    """The run's supervisor; `run` returns the container's exit status."""

    def __init__(self, settings: Settings, *, out: int | None = 1, err: int | None = 2) -> None:
        self.settings = settings
        self.out = out
        self.err = err
        self.started = time.monotonic()
        self.wakeup = Wakeup()
        self.children = Children()
        self.services = Services(settings, self.children, self.wakeup)
        self.phase = "start-up"
        self.agent: AgentOutcome | None = None
        self.owner: tuple[int, int] = (os.geteuid(), os.getegid())
        self.log: int | None = None
        self.pids: PidsWatchdog | None = None
        self.report: int | None = None
        """The read end of the daemon's report of the agent's end (agent container only)."""
        self.plugins = Plugins.load(settings, self.children, self.wakeup, self.say)

    # -- messages --------------------------------------------------------------------

    def say(self, message: str) -> None:
        """One line of the entrypoint's own, to the container's stderr and entrypoint.log."""
        line = f"ssebench-entrypoint: [{time.monotonic() - self.started:8.3f}s] {message}\n"
        data = line.encode("utf-8", errors="replace")
        for fd in (self.err, self.log):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.write(fd, data)

    def mark(self, name: str) -> None:
        """Say when a milestone was reached (seconds since the entrypoint started)."""
        self.say(f"{name} after {time.monotonic() - self.started:.3f} s")

    # -- the run -----------------------------------------------------------------------

    def run(self) -> int:
        """Carry out the run.

        Returns:
            The agent's exit status; 124 at its time limit; 128+N after stop signal N;
            2 when the run could not start.
        """
        try:
            return self._run()
        except Exception as exc:  # a bug of ours must still leave a grade and the marker
            self.say(f"crashed in the {self.phase} phase: {type(exc).__name__}: {exc}")
            self.say(traceback.format_exc().rstrip())
            if not self._has_grade():
                self._write_error(
                    f"the entrypoint crashed in the {self.phase} phase: "
                    f"{type(exc).__name__}: {exc}",
                    traceback.format_exc(),
                )
            if self.phase == "agent" and os.geteuid() == 0:
                with contextlib.suppress(Exception):
                    kill_user(self.settings.model, between=self.children.reap)
            with contextlib.suppress(Exception):
                self._finish(stop_services=True)
            return CRASHED
        finally:
            if self.pids is not None:
                self.pids.stop()  # it writes to the log
            if self.log is not None:
                os.close(self.log)
                self.log = None
            if self.report is not None:
                os.close(self.report)
                self.report = None

    def _run(self) -> int:
        settings = self.settings
        try:
            info = prepare_results(settings.results_dir)
            self.owner = (info.st_uid, info.st_gid)
            self.log = open_log(settings.results_dir, contract.ENTRYPOINT_LOG)
            # Before any service starts: each inherits the score.
            if (oom := lower_own_oom_score()) is not None:
                self.say(oom)
            if settings.pids_limit is not None:
                # From the start: a check or the agent may be the one that forks too much.
                self.pids = PidsWatchdog(settings.pids_limit, self.say, run_users(settings.model))
                self.pids.start()
            prepare_archive(settings.archive_dir, settings.model.uid, settings.model.gid)
        except OSError as exc:
            self.say(f"cannot prepare the results and archive directories: {exc}")
            return self._fail_start(f"cannot prepare the results and archive directories: {exc}")
        if settings.agent_kill_file is not None:
            # Before the agent may start: the port is root's before model could take it.
            # Imported here: http.server costs every other run's start its import.
            from ssebench.daemon.entrypoint._alive import AliveServer

            try:
                AliveServer(settings.agent_kill_file, contract.AGENT_ALIVE_PORT).start()
            except OSError as exc:
                message = f"cannot serve the agent container's liveness probe: {exc}"
                self.say(message)
                return self._fail_start(message)
        if settings.agent_container:
            self.report, self.services.report_fd = os.pipe2(os.O_CLOEXEC)
        try:
            try:
                for service in self.services.start():
                    self.say(
                        f"{service.name} {service.ready_word} after {service.ready_after:.3f} s"
                    )
            finally:
                if self.services.report_fd is not None:
                    # The daemon holds the only write end: its exit is the pipe's end.
                    os.close(self.services.report_fd)
                    self.services.report_fd = None
        except StopRequestedError:
            return self._stopped()
        except ServiceError as exc:
            self.say(
                str(exc) + (f"\n--- end of {exc.service} log ---\n{exc.log}" if exc.log else "")
            )
            return self._fail_start(str(exc), exc.log)
        try:
            source = self._source()
        except (OSError, ValueError) as exc:
            self.say(f"cannot learn the task's source tree from the daemon: {exc}")
            return self._fail_start(f"cannot learn the task's source tree from the daemon: {exc}")
        self.phase = "agent"
        self.plugins.source = source
        self.plugins.run_hook("before-agent")
        self.agent = self._agent_phase(source)
        self.plugins.run_hook("after-agent")
        ended = self._end_agent_phase()
        if self.wakeup.stopping:
            return self._stopped()
        self.phase = "grading"
        self._evaluate(self.agent, prepare_early=self._before_grading(ended))
        if self.wakeup.stopping:
            return self._stopped()
        self.plugins.run_hook("after-grading", guard=settings.results_dir / contract.RESULT_FILE)
        self._finish()
        code = self.agent.exit_code if self.agent.exit_code is not None else 1
        if settings.keep_alive and not self.wakeup.stopping:
            return self._stay_up()
        return code

    def _source(self) -> str:
        """The task's source tree, from the daemon's public project description."""
        reply = UnixHTTPClient(str(self.settings.admin_socket)).get("/project")
        if not reply.ok:
            raise ValueError(f"GET /project answered {reply.status}: {reply.error_text()}")
        project = json.loads(reply.body)
        source = project.get("source") if isinstance(project, dict) else None
        if not isinstance(source, str) or not source.startswith("/"):
            raise ValueError(f"GET /project gave no absolute source path: {source!r}")
        return source

    def _agent_phase(self, source: str) -> AgentOutcome:
        if self.settings.agent_container:
            return self._await_agent()
        log = open_log(self.settings.results_dir, "agent.log")
        try:
            self.plugins.start_beside("on-agent")
            self.mark("agent started")
            return run_agent(
                self.settings,
                self.children,
                self.wakeup,
                cwd=source,
                log=log,
                out=self.out,
                say=self.say,
                beside=self.plugins,
            )
        finally:
            self.plugins.end_beside("the agent phase ended")
            os.close(log)

    def _await_agent(self) -> AgentOutcome:
        """The agent runs in its own container: let it start, then wait for the end.

        The backend reports the agent's exit status over the admin socket (`report`);
        the daemon hands it over on the report pipe. Without a report by `TIMEOUT` plus
        `report_grace` (the backend died, the run was left behind) the phase ends as
        a time-out; a daemon that died ends it too, with no status.
        """
        settings = self.settings
        assert self.report is not None
        self.plugins.start_beside("on-agent")
        try:
            write_marker(settings.go_file.parent, settings.go_file.name, "", 0, 0)
        except OSError as exc:
            self.say(f"cannot let the agent start ({settings.go_file}): {exc}")
        started = time.monotonic()
        self.mark("agent may start")
        deadline = started + settings.timeout + settings.report_grace
        received = b""
        try:
            while True:
                self.children.reap()
                if self.wakeup.stopping:
                    self.say(f"stopped by signal {self.wakeup.stop_signal} in the agent phase")
                    return AgentOutcome(None, time.monotonic() - started, stopped=True)
                left = deadline - time.monotonic()
                if left <= 0:
                    self.say(
                        f"no report of the agent's end within {settings.timeout:g} s "
                        f"(+{settings.report_grace:g} s): the agent phase ends as a time-out"
                    )
                    return AgentOutcome(
                        contract.TIMEOUT_EXIT, time.monotonic() - started, timed_out=True
                    )
                readable = self.wakeup.wait(min(left, 1.0), [self.report, *self.plugins.fds()])
                self.plugins.service(readable)
                if self.report not in readable:
                    continue
                chunk = os.read(self.report, 256)
                received += chunk
                if b"\n" in received:
                    break
                if not chunk or len(received) > 256:
                    self.say("the daemon ended without a report of the agent's end")
                    return AgentOutcome(None, time.monotonic() - started)
        finally:
            self.plugins.end_beside("the agent phase ended")
        duration = time.monotonic() - started
        code = _reported_status(received)
        self.say(f"the agent container reported exit status {code} after {duration:.1f} s")
        return AgentOutcome(code, duration, timed_out=code == contract.TIMEOUT_EXIT)

    def _end_agent_phase(self) -> bool:
        """Tell the daemon: agent-facing listeners refuse every tool from now on.

        Returns:
            Whether the daemon ended the agent phase.
        """
        for service in self.services.dead():
            code = service.proc.returncode if service.proc else None
            self.say(
                f"the {service.name} exited during the agent phase (status {code}); "
                f"see {service.log_name}"
            )
        try:
            reply = UnixHTTPClient(str(self.settings.admin_socket)).post(
                "/admin/agent_exited",
                timeout=AGENT_EXITED_STOPPING if self.wakeup.stopping else AGENT_EXITED_TIMEOUT,
            )
        except (DaemonUnreachableError, ConnectionError, TimeoutError, OSError) as exc:
            self.say(f"cannot end the agent phase on the daemon: {exc}")
            return False
        if reply.ok:
            self.say("agent phase over: the daemon refuses agent-facing tools")
        else:
            self.say(f"the daemon refused to end the agent phase: {reply.error_text()}")
        return reply.ok

    # -- grading ------------------------------------------------------------------------

    def _check_count(self) -> int | None:
        """How many checks grading runs, from the admin socket's `GET /capabilities`
        (every check the task has); None when the daemon cannot say."""
        try:
            reply = UnixHTTPClient(str(self.settings.admin_socket)).get("/capabilities")
            if not reply.ok:
                raise ValueError(f"GET /capabilities answered {reply.status}: {reply.error_text()}")
            caps = json.loads(reply.body)
            return count_checks(
                can_build=caps["can_build"] is True,
                can_run_poc=caps["can_run_poc"] is True,
                poc_count=int(caps["poc_count"]),
                has_function_test=caps["has_function_test"] is True,
                has_intent_test=caps["has_intent_test"] is True,
            )
        except (DaemonUnreachableError, OSError, ValueError, TypeError, KeyError) as exc:
            self.say(f"cannot learn the task's checks from the daemon: {exc}")
            return None

    def _evaluator_argv(self, agent: AgentOutcome, budget: float) -> list[str]:
        argv = [
            *self.settings.evaluator_command(),
            "--timeout",
            f"{budget:g}",
            "--check-timeout",
            f"{self.settings.check_timeout:g}",
            "--agent-duration",
            f"{agent.duration:.3f}",
        ]
        if agent.exit_code is not None:
            argv += ["--agent-exit-code", str(agent.exit_code)]
        if agent.timed_out:
            argv.append("--agent-timeout")
        return argv

    def _evaluate(self, agent: AgentOutcome, *, prepare_early: bool = False) -> None:
        """Run the evaluator to its end, its time limit (plus a grace) or a stop signal;
        write an `error` grade when it left none (except on a stop: `_stopped` does)."""
        settings = self.settings
        # Grading begins with prepare_grading; asked first, it runs while the
        # evaluator starts (see `_ask_to_prepare_grading`).
        early = self._ask_to_prepare_grading() if prepare_early else None
        budget = settings.evaluator_budget(self._check_count())
        log = open_log(settings.results_dir, contract.EVALUATOR_LOG)
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(read_fd, False)
        try:
            proc = self.children.spawn(
                self._evaluator_argv(agent, budget),
                env=service_env(settings.environ),
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            os.close(write_fd)
            os.close(read_fd)
            os.close(log)
            if early is not None:
                early.close()
            self.say(f"cannot start the evaluator: {exc}")
            self._write_error(f"cannot start the evaluator: {exc}")
            return
        os.close(write_fd)
        self.say(f"evaluator started: pid {proc.pid}, time limit {budget:g} s")
        self.plugins.start_beside("on-grading")
        # Reading the grade needs ssebench.spec, which the entrypoint does not load at
        # start-up; loading it now, while the evaluator works, saves that pause after it.
        importlib.import_module("ssebench.spec")
        relay = Relay(read_fd, log, self.err)
        deadline = time.monotonic() + budget + settings.evaluator_grace
        killed = False
        while True:
            self.children.reap()
            if proc.returncode is not None:
                break
            if self.wakeup.stopping or time.monotonic() >= deadline:
                killed = not self.wakeup.stopping
                signal_group(proc.pid, signal.SIGKILL)
                self.children.wait(proc, 5.0, self.wakeup)
                break
            readable = self.wakeup.wait(
                min(1.0, deadline - time.monotonic()),
                ([read_fd] if relay.open else []) + self.plugins.fds(),
            )
            if read_fd in readable:
                relay.pump()
            self.plugins.service(readable)
        self.plugins.end_beside("grading ended")
        relay.drain(self.wakeup, 1.0)
        relay.finish()
        if early is not None:
            early.close()
        os.close(read_fd)
        os.close(log)
        if self.wakeup.stopping:
            return
        if killed:
            self.say("the evaluator did not finish within its time limit: killed")
            if not self._has_grade():
                self._write_error(
                    f"the evaluator did not finish within {budget:g} s "
                    f"(+{settings.evaluator_grace:g} s): killed",
                    log_tail(settings.results_dir, contract.EVALUATOR_LOG),
                    evaluator_timeout=True,
                )
        elif not self._has_grade():
            self.say(f"the evaluator exited with status {proc.returncode} and left no grade")
            self._write_error(
                f"the evaluator exited with status {proc.returncode} without writing a grade",
                log_tail(settings.results_dir, contract.EVALUATOR_LOG),
            )
        else:
            self.say(f"evaluator finished: status {proc.returncode}")

    def _before_grading(self, ended: bool) -> bool:
        """Run the `before-grading` plugins once the daemon has taken the agent's diff
        (nothing they do to the tree is graded); skip them when it has not said so.

        Returns:
            Whether the evaluator should still ask early for grading to be prepared.
        """
        if not self.plugins.of("before-grading"):
            return ended
        taken = False
        if ended and (asked := self._ask_to_prepare_grading()) is not None:
            with contextlib.suppress(OSError):
                asked.settimeout(PREPARE_WAIT)
                taken = asked.recv(1) != b""  # the answer begins: the diff is taken
            asked.close()
        if taken:
            self.plugins.run_hook("before-grading")
        else:
            # Run now, a plugin could change the tree the daemon has yet to take.
            self.plugins.skip_hook(
                "before-grading", "the daemon did not say it had taken the agent's diff"
            )
        return False

    def _ask_to_prepare_grading(self) -> socket.socket | None:
        """Send `POST /prepare_grading` now, without waiting for the answer.

        Grading begins with it (the agent's diff taken and applied to the graded
        copy); asked here, the daemon does it while the evaluator loads, and answers
        the evaluator's own call at once ("a second call answers the same"). The
        agent phase is over, so the tree no longer changes. Whatever goes wrong is
        left to the evaluator's call to find and record.
        """
        try:
            return UnixHTTPClient(str(self.settings.admin_socket)).send(
                "POST", "/prepare_grading", b"{}", timeout=5.0
            )
        except (DaemonUnreachableError, OSError):
            return None

    # -- results ------------------------------------------------------------------------

    def _has_grade(self) -> bool:
        """Whether result.json holds a complete grade."""
        from ssebench.spec import DecodeError, Result, read_json

        try:
            read_json(self.settings.results_dir / contract.RESULT_FILE, Result)
        except DecodeError:
            return False
        return True

    def _write_error(
        self,
        message: str,
        log: str | None = None,
        *,
        evaluator_timeout: bool = False,
        stopped_by: str | None = None,
    ) -> None:
        """Write an `error` grade with the reason (the harness's: the entrypoint knows no
        other); the agent's figures as far as known; the stop signal, if one ended the run."""
        from ssebench.daemon.evaluator import write_result
        from ssebench.spec import PatchResult, Result, RuntimeResult

        agent = self.agent
        result = Result(
            patch_result=PatchResult(
                status="error", error_msg=message, error_log=log or None, error_source="harness"
            ),
            runtime_result=RuntimeResult(
                agent_duration=round(agent.duration, 3) if agent else None,
                agent_timeout=agent.timed_out if agent else False,
                evaluator_timeout=evaluator_timeout,
                agent_exit_code=agent.exit_code if agent else None,
                stopped_by=stopped_by,
            ),
        )
        try:
            write_result(self.settings.results_dir, result)
        except OSError as exc:
            self.say(f"cannot write {contract.RESULT_FILE}: {exc}")

    def _finish(self, *, stop_services: bool | None = None) -> None:
        """Stop the services (unless kept), hand the files over, write the marker.

        After a completed grading (`stop_services` left to the settings) the services
        are killed outright; on every other path they get SIGTERM and a wait first.
        """
        settings = self.settings
        if stop_services is None:
            if not settings.keep_alive:
                self.services.stop(graceful=False)
        elif stop_services:
            self.services.stop()
        status = "unknown"
        with contextlib.suppress(Exception):
            status = self._status()
        self.plugins.write(self.phase, self.owner)
        self._kill_model()  # before the hand-over too: nothing of model's races it
        for directory, include_self in (
            (settings.results_dir, False),
            # Inside the results directory on the host; elsewhere (a separate volume) too.
            (settings.archive_dir, True),
        ):
            try:
                done = hand_over(directory, *self.owner, include_self=include_self)
            except Exception as exc:  # whatever the agent left there, the marker must follow
                self.say(f"cannot hand {directory} over to uid {self.owner[0]}: {exc}")
                continue
            if done.removed_count:
                self.say(
                    f"removed from {directory} before the hand-over ({done.removed_count}): "
                    + ", ".join(done.removed)
                    + (", ..." if done.removed_count > len(done.removed) else "")
                )
            if done.skipped_count:
                self.say(
                    f"cannot hand over or remove in {directory} ({done.skipped_count}): "
                    + ", ".join(done.skipped)
                    + (", ..." if done.skipped_count > len(done.skipped) else "")
                )
        try:
            write_marker(settings.results_dir, contract.GRADED_MARKER, f"{status}\n", *self.owner)
        except OSError as exc:
            self.say(f"cannot write the {contract.GRADED_MARKER} marker: {exc}")
        self.say(f"graded: {status}")

    def _kill_model(self) -> None:
        """Kill every `model` process once more, before the hand-over and the `.graded` marker.

        Integrity rule (docs/integrity.md): `model` is killed again after every step
        that could start its code, until `.graded` is written; after the marker
        a kept run may start shells as `model` (`runs exec`).
        """
        model = self.settings.model
        if os.geteuid() != 0 or model.uid in (0, os.geteuid()):
            return
        try:
            killed = kill_user(model, between=self.children.reap)
        except (RuntimeError, ValueError) as exc:  # e.g. a process stuck in the kernel
            self.say(f"cannot end every process of {model.name} before the marker: {exc}")
            return
        if killed:
            self.say(f"killed {killed} process(es) of {model.name} found after grading")

    def _status(self) -> str:
        from ssebench.spec import Result, read_json

        return read_json(
            self.settings.results_dir / contract.RESULT_FILE, Result
        ).patch_result.status

    def refuse(self, message: str) -> int:
        """Settings the run cannot start with: record why, hand over, exit 2.

        Returns:
            2 (`START_FAILED`).
        """
        self.say(f"refusing to start: {message}")
        try:
            info = prepare_results(self.settings.results_dir)
        except OSError as exc:
            self.say(f"cannot use the results directory: {exc}")
            return START_FAILED
        self.owner = (info.st_uid, info.st_gid)
        return self._fail_start(f"the run cannot start: {message}")

    def _fail_start(self, message: str, log: str | None = None) -> int:
        """The run could not start: an `error` grade with the reason, then finish."""
        self._write_error(message, log)
        self._finish(stop_services=True)
        if self.settings.keep_alive and not self.wakeup.stopping:
            self._stay_up()
        return START_FAILED

    def _stopped(self) -> int:
        """A stop signal: end what runs, record why unless graded, finish, exit 128+N."""
        signum = self.wakeup.stop_signal or signal.SIGTERM
        name = signal.Signals(signum).name
        self.say(f"stopped by {name} during the {self.phase} phase")
        if not self._has_grade():
            self._write_error(
                f"the run was stopped by {name} during the {self.phase} phase", stopped_by=name
            )
        self._finish(stop_services=True)
        return 128 + signum

    def _stay_up(self) -> int:
        """SSE_KEEP_ALIVE=1: keep the services up and reap orphans until a stop signal."""
        self.say(f"{contract.ENV_KEEP_ALIVE}=1: staying up until stopped")
        while not self.wakeup.stopping:
            self.children.reap()
            self.wakeup.wait(None)
        self.services.stop()
        return 128 + (self.wakeup.stop_signal or signal.SIGTERM)
