"""FakeBackend: a container platform in memory, for the tests of whatever drives a backend.

It implements the whole `Backend` interface without an engine. An image is a
set of files and a program; a run is a thread playing its image's program
(`FakeContainer` is what the program sees). The results directory works as
with a platform that keeps them in its own storage: the container starts with
a copy of the run directory, and what it writes (or deletes) reaches the run
directory only through `collect_results`. `stop` asks the program to end and
kills it (exit 137) after the grace. Runs started elsewhere can be added with
`add_run`.

For tests it records every call that acts (`calls`; `list_runs` and
`inspect_run` are only questions), signals when a method is first entered
(`entered`), and runs a test's hook before acting (`hooks`): a hook that raises
makes the call fail with that error; one that returns `SKIP` makes a call that
returns nothing do nothing.
"""

from __future__ import annotations

import enum
import itertools
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, Final, NamedTuple

from typing_extensions import override

from ssebench.spec import (
    Backend,
    BackendError,
    ImageRequest,
    Images,
    Mount,
    PlatformNotFoundError,
    RunHandle,
    RunInfo,
    RunSpec,
    RunState,
    RunTimeoutError,
    contract,
)

_POLL: Final = 0.02
"""Seconds between looks at a run's state (short: a signal handler runs in between)."""


class Skip(enum.Enum):
    """What a hook returns to make a call that returns nothing do nothing."""

    SKIP = "skip"


SKIP: Final = Skip.SKIP

Hook = Callable[..., object]
"""Called with a call's arguments before the fake acts."""


class Call(NamedTuple):
    """One call made to the fake: the method and its arguments, positionally."""

    method: str
    args: tuple[Any, ...]


Program = Callable[["FakeContainer"], int]
"""What a container of an image does; returns its exit status."""


def exits(status: int = 0) -> Program:
    """A program that does nothing and exits with `status`."""
    return lambda container: status


@dataclass(frozen=True)
class FakeImage:
    """An image: its files (for `copy_from_image`) and what a container of it does."""

    files: Mapping[str, bytes] = field(default_factory=dict)
    program: Program = field(default=exits(0))


@dataclass(eq=False)
class _Run:
    handle: RunHandle
    image: str
    labels: dict[str, str]
    created_at: str
    spec: RunSpec | None = None
    state: RunState = "running"
    exit_code: int | None = None
    output: list[str] = field(default_factory=list)
    view: dict[Path, bytes] = field(default_factory=dict)
    snapshot: frozenset[Path] = frozenset()
    changed: threading.Condition = field(default_factory=threading.Condition)
    stop_requested: threading.Event = field(default_factory=threading.Event)
    killed: threading.Event = field(default_factory=threading.Event)

    def end(self, status: int) -> None:
        with self.changed:
            if self.state != "exited":
                self.state, self.exit_code = "exited", status
            self.changed.notify_all()


_print_lock = threading.Lock()


class FakeContainer:
    """What a fake run's program sees: its environment, its mounts, and requests to stop."""

    def __init__(self, spec: RunSpec, run: _Run) -> None:
        self.env: Mapping[str, str] = dict(spec.env)
        self._spec = spec
        self._run = run

    def say(self, line: str) -> None:
        """Write a line to the container's stdout (this process's stdout, and its logs)."""
        self._emit(line, sys.stdout)

    def complain(self, line: str) -> None:
        """Write a line to the container's stderr (this process's stderr, and its logs)."""
        self._emit(line, sys.stderr)

    def _emit(self, line: str, stream: Any) -> None:
        if self._run.killed.is_set():
            return  # a killed process says nothing more
        with _print_lock:
            stream.write(line + "\n")
            stream.flush()
        with self._run.changed:
            self._run.output.append(line)
            self._run.changed.notify_all()

    def _host_path(self, path: str, *, writing: bool) -> Path:
        target = PurePosixPath(path)
        writable = [self._spec.results, self._spec.archive]
        for mount in [*writable, *self._spec.artifacts]:
            if target.is_relative_to(mount.target):
                if writing and (mount.read_only or mount not in writable):
                    raise PermissionError(f"{path} is on a read-only mount")
                return Path(mount.source) / target.relative_to(mount.target)
        raise FileNotFoundError(f"{path} is on no mount of the fake container")

    def write(self, path: str, data: bytes) -> None:
        """Write a file under one of the run's writable mounts (results, archive)."""
        host = self._host_path(path, writing=True)
        with self._run.changed:
            self._run.view[host] = data
            self._run.changed.notify_all()

    def remove(self, path: str) -> None:
        """Delete a file under one of the run's writable mounts."""
        host = self._host_path(path, writing=True)
        with self._run.changed:
            self._run.view.pop(host, None)

    def read(self, path: str) -> bytes:
        """Read a file of a mount (an artifact, or what the run wrote)."""
        host = self._host_path(path, writing=False)
        with self._run.changed:
            if host in self._run.view:
                return self._run.view[host]
        return host.read_bytes()

    def wait_for_stop(self) -> None:
        """Return once the run was asked to stop (or was killed)."""
        while not self._run.stop_requested.wait(_POLL):
            pass

    def wait_for_kill(self) -> None:
        """Return once the run was killed: a program that ignores SIGTERM."""
        while not self._run.killed.wait(_POLL):
            pass


class FakeBackend(Backend[RunHandle]):
    """The Backend interface over an in-memory platform (see the module's docstring).

    Args:
        images: the images the platform has, by name; `copy_from_image` and
            `start` find them here.
        built: the image `prepare_images` makes for every request (its name is
            `fake/agent-<agent>/<task>:1`).
    """

    name: ClassVar[str] = "fake"
    builds_images: ClassVar[bool] = True

    def __init__(
        self,
        *,
        images: Mapping[str, FakeImage] | None = None,
        built: FakeImage | None = None,
    ) -> None:
        from ssebench.conformance._fake_probe import probe_images

        self.images: dict[str, FakeImage] = dict(probe_images() if images is None else images)
        self.built = built or FakeImage()
        self.hooks: dict[str, Hook] = {}
        self.calls: list[Call] = []
        self._entered: defaultdict[str, threading.Event] = defaultdict(threading.Event)
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)

    # -- what tests look at ----------------------------------------------------------------

    @property
    def methods(self) -> list[str]:
        """The methods called so far, in order."""
        return [call.method for call in self.calls]

    def calls_to(self, method: str) -> list[tuple[Any, ...]]:
        """The arguments of each call to `method`, in order."""
        return [call.args for call in self.calls if call.method == method]

    def entered(self, method: str) -> threading.Event:
        """An event set once `method` is first called."""
        with self._lock:
            return self._entered[method]

    def add_run(self, info: RunInfo, output: Sequence[str] = ()) -> None:
        """Put a run started elsewhere on the platform, as `info` describes it."""
        run = _Run(
            handle=info.handle,
            image=info.image,
            labels=dict(info.labels),
            created_at=info.created_at or _now(),
            state=info.state,
            exit_code=info.exit_code,
            output=list(output),
        )
        with self._lock:
            self._runs[info.handle.name] = run

    def _enter(self, method: str, *args: Any) -> bool:
        """Record the call and run its hook; True when the hook says to do nothing."""
        with self._lock:
            self.calls.append(Call(method, args))
            self._entered[method].set()
            hook = self.hooks.get(method)
        return hook is not None and hook(*args) is SKIP

    def _find(self, handle: RunHandle) -> _Run | None:
        with self._lock:
            return self._runs.get(handle.name)

    def _get(self, handle: RunHandle) -> _Run:
        run = self._find(handle)
        if run is None:
            raise PlatformNotFoundError(f"the fake platform has no run {handle.name}")
        return run

    # -- the interface -----------------------------------------------------------------------

    @override
    def prepare_images(self, request: ImageRequest) -> Images:
        self._enter("prepare_images", request)
        if request.mode == "sidecar":
            name = f"fake/agent-{request.agent.name}/sidecar:1"
            environment = f"fake/tool-sidecar/{request.task.id.lower()}:1"
            self.images[name] = self.images[environment] = self.built
            return Images(agent=name, environment=environment)
        name = f"fake/agent-{request.agent.name}/{request.task.id.lower()}:1"
        environment = f"fake/tool/{request.task.id.lower()}:1"
        self.images[name] = self.images[environment] = self.built
        return Images(agent=name, environment=environment)

    @override
    def copy_from_image(
        self, image: str, path: str, dest: Path, platform: str | None = None
    ) -> None:
        if self._enter("copy_from_image", image, path, dest, platform):
            return
        found = self.images.get(image)
        if found is None:
            raise PlatformNotFoundError(f"the fake platform has no image {image}")
        data = found.files.get(path)
        if data is None:
            raise PlatformNotFoundError(f"no file {path} in {image}")
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            # As a real copy lands: private until the caller decides otherwise.
            dest.chmod(0o600)
        except OSError as exc:
            raise BackendError(f"cannot write {dest}: {exc}") from exc

    @override
    def start(self, spec: RunSpec) -> RunHandle:
        self._enter("start", spec)
        image = self.images.get(spec.image)
        if image is None:
            raise BackendError(f"starting run {spec.run_id} failed: no image {spec.image}")
        handle = RunHandle(
            run_id=spec.run_id, name=f"fake-{spec.run_id}-{next(self._numbers)}", keep=spec.keep
        )
        snapshot = _files(spec.results) | _files(spec.archive)
        run = _Run(
            handle=handle,
            image=spec.image,
            labels=dict(spec.labels),
            created_at=_now(),
            spec=spec,
            view={path: path.read_bytes() for path in snapshot},
            snapshot=frozenset(snapshot),
        )
        with self._lock:
            self._runs[handle.name] = run
        container = FakeContainer(spec, run)
        threading.Thread(
            target=_play, args=(run, image.program, container), name=handle.name, daemon=True
        ).start()
        return handle

    @override
    def wait(self, handle: RunHandle, timeout: float | None = None) -> int:
        self._enter("wait", handle, timeout)
        run = self._get(handle)
        marker = (
            Path(run.spec.results.source) / contract.GRADED_MARKER if run.spec is not None else None
        )
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with run.changed:
                if handle.keep and marker is not None and marker in run.view:
                    return 0
                if run.state == "exited":
                    return run.exit_code if run.exit_code is not None else 0
                if deadline is not None and time.monotonic() > deadline:
                    raise RunTimeoutError(f"run {handle.run_id} did not finish in {timeout}s")
                run.changed.wait(_POLL)

    @override
    def logs(self, handle: RunHandle, follow: bool = False) -> Iterator[str]:
        self._enter("logs", handle, follow)
        return _lines(self._get(handle), follow)

    @override
    def collect_results(self, handle: RunHandle, dest: Path) -> None:
        if self._enter("collect_results", handle, dest):
            return
        run = self._get(handle)
        if run.spec is None:
            return
        with run.changed:
            view, snapshot = dict(run.view), run.snapshot
        results = Path(run.spec.results.source)
        archive = Path(run.spec.archive.source)
        archive_dest = (
            dest / archive.relative_to(results)
            if archive.is_relative_to(results)
            else dest / contract.RUN_ARCHIVE
        )
        try:
            for root, into in ((results, dest), (archive, archive_dest)):
                for path in snapshot - view.keys():
                    if path.is_relative_to(root):
                        (into / path.relative_to(root)).unlink(missing_ok=True)
                for path, data in view.items():
                    if path.is_relative_to(root):
                        target = into / path.relative_to(root)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(data)
        except OSError as exc:
            raise BackendError(f"cannot put the results of {handle.name} in {dest}: {exc}") from exc

    @override
    def stop(self, handle: RunHandle, grace: float = contract.STOP_GRACE) -> None:
        if self._enter("stop", handle, grace):
            return
        run = self._find(handle)
        if run is None or run.state == "exited":
            return
        run.stop_requested.set()
        if run.spec is None:
            run.end(143)  # a run added with add_run has no program: it obeys at once
            return
        with run.changed:
            ended = run.changed.wait_for(lambda: run.state == "exited", timeout=grace)
        if not ended:
            run.killed.set()
            run.end(137)

    @override
    def cleanup(self, handle: RunHandle) -> None:
        if self._enter("cleanup", handle) or handle.keep:
            return
        run = self._find(handle)
        if run is None:
            return
        run.stop_requested.set()
        run.killed.set()
        run.end(137)
        with self._lock:
            self._runs.pop(handle.name, None)

    @override
    def list_runs(self, labels: dict[str, str] | None = None) -> list[RunInfo]:
        wanted = (labels or {}).items()
        with self._lock:
            runs = list(self._runs.values())
        return [
            RunInfo(
                run_id=run.handle.run_id,
                name=run.handle.name,
                state=run.state,
                image=run.image,
                handle=run.handle,
                exit_code=run.exit_code,
                labels=dict(run.labels),
                created_at=run.created_at,
            )
            for run in runs
            if all(run.labels.get(key) == value for key, value in wanted)
        ]


def _play(run: _Run, program: Program, container: FakeContainer) -> None:
    try:
        status = program(container)
    except Exception as exc:  # the program's crash is the container's, not the fake's
        container.complain(f"{type(exc).__name__}: {exc}")
        status = 1
    if not run.killed.is_set():
        run.end(status)


def _lines(run: _Run, follow: bool) -> Iterator[str]:
    sent = 0
    while True:
        with run.changed:
            pending = run.output[sent:]
            done = run.state == "exited" or not follow
            if not pending and not done:
                run.changed.wait(_POLL)
                continue
        yield from pending
        sent += len(pending)
        if done:
            with run.changed:
                if len(run.output) == sent:
                    return


def _files(mount: Mount) -> set[Path]:
    root = Path(mount.source)
    return {path for path in root.rglob("*") if path.is_file()} if root.is_dir() else set()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
