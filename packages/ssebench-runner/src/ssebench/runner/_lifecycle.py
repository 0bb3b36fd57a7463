"""The Runner: drives one planned run through a Backend and records it.

    prepare_images -> copy the reference patch -> run directory, run.json
    -> start -> wait -> collect_results -> cleanup -> record

It reaches the platform only through the Backend it is given, so tests pass
a fake one. One Runner may carry out several runs at once from several threads
(`ssebench eval`): `stop_all` then stops every run in flight, as a signal
stops the one run of `ssebench run`.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Final

from ssebench.runner._plan import RunPlan, run_spec
from ssebench.runner._plugins import stage_plugins
from ssebench.runner._record import RunEnding, record_run, write_run_record
from ssebench.runner._run_dir import create_run_dir
from ssebench.runner._signals import SecondSignal, StopOnSignal, signal_name
from ssebench.spec import (
    Backend,
    BackendError,
    GatewayReport,
    ImageRequest,
    Images,
    ModelGateway,
    PlatformNotFoundError,
    PlatformUnavailableError,
    RunHandle,
    RunSpec,
    SSEBenchError,
    Summary,
    contract,
)

log = logging.getLogger(__name__)

STOPPER_SLACK: Final = 30.0
"""Seconds beyond the stop grace to wait for `stop` to return before recording anyway."""


def utc_now() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)


def iso_utc(moment: datetime) -> str:
    """`moment` as ISO 8601 in UTC, to the second: `2025-01-02T03:04:05+00:00`."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")


class RunCancelled(SSEBenchError):
    """The runner was told to stop (`Runner.stop_all`) before this run was created.

    Nothing of the run exists: no run directory, no container.
    """


def said(exc: BaseException) -> str:
    """What an error says, without its type or traceback.

    Backends promise messages without the run's environment, so the message is
    all that is shown.
    """
    return str(exc) or type(exc).__name__


class Runner:
    """Carries out planned runs on one backend and records each in its run directory."""

    def __init__(
        self,
        backend: Backend[Any],
        *,
        stop_grace: float = contract.STOP_GRACE,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        """Drive runs on `backend`.

        Args:
            backend: the platform to run on.
            stop_grace: seconds `stop` gives the container before killing it.
            clock: the current time (tests fix it).
        """
        self._backend = backend
        self._stop_grace = stop_grace
        self._clock = clock
        self._attempts: set[_Attempt] = set()
        self._attempts_lock = threading.Lock()
        # Runs carried out at once prepare their images one at a time: a backend's image
        # building (shared layers, its cache) is not promised to be safe from several threads.
        self._prepare_lock = threading.Lock()
        self._stopping: int | None = None

    @property
    def stopping(self) -> int | None:
        """The signal `stop_all` was called with, if it was."""
        return self._stopping

    def stop_all(self, signum: int) -> None:
        """Stop every run in flight and refuse new ones; each is recorded as stopped by `signum`.

        Safe to call from a signal handler (it takes no lock and leaves the
        slow part to a thread per run) and more than once. A run whose images
        are being prepared is not created (`run` raises RunCancelled); a run
        that is starting is stopped as soon as it has started.

        Args:
            signum: the signal that asked for the stop, recorded in each run.
        """
        self._stopping = signum
        # A copy made in one step: the set may change in a worker thread meanwhile.
        for attempt in tuple(self._attempts):
            attempt.stop_from(signum)

    def run(self, plan: RunPlan) -> Summary:
        """Carry out one run and record it.

        Nothing is created before the images are ready and the reference patch
        is copied; from the moment the run directory exists, the run is
        recorded whatever happens to its container.

        Args:
            plan: the run, checked by `plan_run`.

        Returns:
            The run's summary, as written to `summary.json`.

        Raises:
            UserError: the images cannot be prepared.
            BackendError: the reference patch cannot be copied out of the image.
            SecondSignal: a second SIGINT or SIGTERM ended the run early; it is
                recorded first.
            RunCancelled: `stop_all` was called before the run was created.
            OSError: the run directory cannot be written.
        """
        with self._prepare_lock:
            self._check_not_stopping(plan)
            images = self._backend.prepare_images(
                ImageRequest(
                    mode=plan.config.mode,
                    task=plan.task,
                    agent=plan.agent,
                    prebuilt=plan.prebuilt,
                    platform=plan.platform,
                    case=plan.case,
                    tool_layer=plan.tool_layer,
                )
            )
            # Started (or found running) before anything of the run exists: a gateway
            # that cannot start leaves nothing behind.
            gateway = self._backend.gateway(plan.models) if plan.models is not None else None
        # mkdtemp makes the folder 0700: the patch is hidden material.
        private = Path(tempfile.mkdtemp(prefix="ssebench-reference-"))
        try:
            # The seed copies the patch after creating the run directory; doing
            # it first means a failed copy leaves no half-made run behind.
            reference = self._copy_reference(plan, images, private)
            staged = (
                stage_plugins(plan.config.plugins, plan.plugins_home, private / "plugins")
                if plan.config.plugins and plan.plugins_home is not None
                else None
            )
            self._check_not_stopping(plan)
            if gateway is not None:
                # Before the run directory: a key that cannot be made leaves no run behind.
                plan = _with_key(plan, gateway)
            create_run_dir(plan.run_dir)
            log.info("run directory: %s", plan.run_dir)
            spec = run_spec(plan, images, reference, staged)
            write_run_record(plan.run_dir, spec, plan.config)
            started_at = iso_utc(self._clock())
            attempt = _Attempt(self._backend, spec, plan.run_dir, self._stop_grace)
            with self._attempts_lock:
                self._attempts.add(attempt)
            if self._stopping is not None:
                # stop_all came between the check above and now: the run stops once started.
                attempt.stop_from(self._stopping)
            interrupted: SecondSignal | None = None
            try:
                ending = attempt.carry_out()
            except SecondSignal as interrupt:
                interrupted = interrupt
                ending = RunEnding(
                    started=attempt.handle is not None,
                    stopped_by=attempt.stop_signal,
                    failure=f"ended by {interrupt} before the results were collected",
                )
            finally:
                with self._attempts_lock:
                    self._attempts.discard(attempt)
            # Recorded either way; a second signal is raised again once it is.
            summary = record_run(
                plan,
                ending,
                started_at=started_at,
                reference_patch=reference,
                images=_as_started(images, attempt.handle),
                gateway=_close_key(gateway, plan.run_id),
            )
            if interrupted is not None:
                raise interrupted
            return summary
        finally:
            shutil.rmtree(private, ignore_errors=True)
            if gateway is not None:
                _close_key(gateway, plan.run_id)  # revoked whatever happened (safe to repeat)

    def _check_not_stopping(self, plan: RunPlan) -> None:
        if self._stopping is not None:
            raise RunCancelled(
                f"run {plan.run_id} was not started: stopping on {signal_name(self._stopping)}"
            )

    def _copy_reference(self, plan: RunPlan, images: Images, folder: Path) -> Path:
        image = images.task_image()
        source = str(PurePosixPath(contract.TASK_DIR) / plan.task.config.files.patch)
        dest = folder / "patch.diff"
        try:
            self._backend.copy_from_image(image, source, dest, plan.platform)
        except (RuntimeError, SSEBenchError) as exc:
            raise BackendError(
                f"cannot copy the reference patch {source} out of image {image}: {said(exc)}"
            ) from exc
        if not dest.is_file():
            raise BackendError(
                f"cannot copy the reference patch {source} out of image {image}: "
                "the backend reported success but wrote no file"
            )
        # The folder keeps it private on this host; inside the container the
        # reference agent runs as `model`, which must be able to read the mount.
        dest.chmod(0o644)
        return dest


def _as_started(images: Images, handle: RunHandle | None) -> Images:
    """`images`, with what the backend says it started each container from where it says
    (`RunHandle.images`: on a cluster, the digest a tag resolved to when it was pulled)."""
    if handle is None or not handle.images:
        return images
    return Images(
        agent=handle.images.get("agent", images.agent),
        environment=handle.images.get("environment", images.environment),
    )


def _with_key(plan: RunPlan, gateway: ModelGateway) -> RunPlan:
    """The plan with the run's fresh model key and the gateway's URL in its environment."""
    key = gateway.open_key(plan.run_id, [plan.config.model], plan.config.budget)
    env = {
        **plan.env,
        contract.ENV_API_KEY: key,
        contract.ENV_BASE_URL: gateway.base_url,
        contract.ENV_MODEL_NAME: plan.config.model,
    }
    return dataclasses.replace(plan, env=env)


def _close_key(gateway: ModelGateway | None, run_id: str) -> GatewayReport | None:
    """Revoke the run's key and return what it used (None, with a warning, if that fails)."""
    if gateway is None:
        return None
    try:
        return gateway.close_key(run_id)
    except Exception as exc:
        log.warning("closing the run's model key failed: %s", said(exc))
        return None


class _Attempt:
    """One pass through start, wait, collect_results and cleanup, with its stop state."""

    def __init__(self, backend: Backend[Any], spec: RunSpec, dest: Path, grace: float) -> None:
        self._backend = backend
        self._spec = spec
        self._dest = dest
        self._grace = grace
        self.handle: RunHandle | None = None
        self.stop_signal: int | None = None
        # Taken once and never released: whoever takes it sends the one `stop`.
        self._stop_claim = threading.Lock()
        self._stopper: threading.Thread | None = None

    def carry_out(self) -> RunEnding:
        with StopOnSignal(self._on_signal):
            log.info("starting run %s", self._spec.run_id)
            try:
                handle = self._backend.start(self._spec)
            except Exception as exc:
                return RunEnding(started=False, failure=f"the run failed to start: {said(exc)}")
            self.handle = handle
            try:
                if self.stop_signal is not None:
                    # The signal came while the run was starting.
                    self._request_stop()
                exit_status, failure = self._wait(handle)
                stopped_by = self.stop_signal
                self._join_stopper()
                failure = self._collect(handle, failure)
            finally:
                gone = self._cleanup(handle)
            if gone is not None and failure is None:
                # The engine stopped the container on its way down (a restart, a crash):
                # the run's SIGTERM was the platform's, not a person's `runs stop`.
                failure = gone
        return RunEnding(
            started=True, exit_status=exit_status, failure=failure, stopped_by=stopped_by
        )

    def _on_signal(self, signum: int) -> None:
        # Runs inside the signal handler: note it and leave the slow part to a thread.
        self.stop_signal = signum
        self._request_stop()

    def stop_from(self, signum: int) -> None:
        """Stop the run as a signal would (also from another thread, or before it started)."""
        if self.stop_signal is None:
            self._on_signal(signum)

    def _request_stop(self) -> None:
        handle = self.handle
        if handle is None or not self._stop_claim.acquire(blocking=False):
            return
        self._stopper = threading.Thread(
            target=self._stop, args=(handle,), name="ssebench-stop", daemon=True
        )
        self._stopper.start()

    def _stop(self, handle: RunHandle) -> None:
        if self.stop_signal is not None:
            log.warning(
                "%s: stopping the run; a second signal ends ssebench at once",
                signal_name(self.stop_signal),
            )
        try:
            self._backend.stop(handle, self._grace)
        except Exception as exc:
            log.warning("stopping the run failed: %s", said(exc))

    def _join_stopper(self) -> None:
        stopper = self._stopper
        if stopper is None:
            return
        stopper.join(self._grace + STOPPER_SLACK)
        if stopper.is_alive():
            log.warning("the backend has not confirmed the stop; recording the run anyway")

    def _wait(self, handle: RunHandle) -> tuple[int | None, str | None]:
        try:
            return self._backend.wait(handle, None), None
        except TimeoutError as exc:
            failure = f"the run did not end in time: {said(exc)}"
        except PlatformUnavailableError as exc:
            # The engine restarted or went away under the run: an infra_error, said plainly.
            failure = f"the container platform went away during the run: {said(exc)}"
        except PlatformNotFoundError as exc:
            failure = f"the run's container vanished (removed from outside?): {said(exc)}"
        except Exception as exc:
            failure = f"the run could not be watched: {said(exc)}"
        # A run that is no longer watched must not go on unseen.
        self._request_stop()
        self._join_stopper()
        return None, failure

    def _collect(self, handle: RunHandle, failure: str | None) -> str | None:
        try:
            self._backend.collect_results(handle, self._dest)
        except Exception as exc:
            problem = f"the results could not be collected: {said(exc)}"
            return problem if failure is None else f"{failure}; {problem}"
        return failure

    def _cleanup(self, handle: RunHandle) -> str | None:
        """Clean up; the failure to record when the container platform went away meanwhile."""
        try:
            self._backend.cleanup(handle)
        except Exception as exc:
            log.warning("cleaning up after the run failed: %s", said(exc))
            if isinstance(exc, PlatformUnavailableError):
                return f"the container platform went away during the run: {said(exc)}"
        return None
