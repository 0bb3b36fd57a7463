"""A Backend that holds a list of runs and records what is asked of it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from ssebench.spec import (
    Backend,
    BackendError,
    ImageRequest,
    Images,
    RunHandle,
    RunInfo,
    RunSpec,
    RunState,
    labels,
)

SECRET = "sk-fake-never-shown-0123456789"


def fake_run(
    run_id: str,
    *,
    agent: str = "probe",
    state: RunState = "running",
    created_at: str = "2025-01-02T03:04:05Z",
    extra_labels: dict[str, str] | None = None,
) -> RunInfo:
    """A run as a backend would report it, with the labels the runner puts on every run."""
    name = f"ssebench-{run_id}-{agent}"
    return RunInfo(
        run_id=run_id,
        name=name,
        state=state,
        image="fake/probe:1",
        exit_code=143 if state == "exited" else None,
        created_at=created_at,
        labels={
            labels.RUN_ID: run_id,
            labels.WEBUI: "true",
            labels.TASK_ID: "probe-task",
            labels.MODEL: "none",
            labels.AGENT: agent,
            labels.RESULTS: f"/results/probe-task/none/{agent}/{run_id}",
            labels.REFERENCE_RUN: "false",
            **(extra_labels or {}),
        },
        handle=RunHandle(run_id=run_id, name=name, keep=True),
    )


class ListingBackend(Backend[RunHandle]):
    """Implements the real interface over `runs`; starts nothing."""

    name = "fake"

    def __init__(self, runs: Sequence[RunInfo] = (), *, remove_leaves: bool = False) -> None:
        self.runs = list(runs)
        self.remove_leaves = remove_leaves
        self.calls: list[tuple[str, Any]] = []

    def prepare_images(self, request: ImageRequest) -> Images:
        raise BackendError("the fake backend prepares nothing")

    def copy_from_image(
        self, image: str, path: str, dest: Path, platform: str | None = None
    ) -> None:
        raise RuntimeError("the fake backend has no images")

    def start(self, spec: RunSpec) -> RunHandle:
        raise BackendError("the fake backend starts nothing")

    def wait(self, handle: RunHandle, timeout: float | None = None) -> int:
        return 0

    def logs(self, handle: RunHandle, follow: bool = False) -> Iterator[str]:
        self.calls.append(("logs", handle.name))
        yield from (f"line {number} of {handle.name}" for number in range(3))

    def collect_results(self, handle: RunHandle, dest: Path) -> None:
        return None

    def stop(self, handle: RunHandle, grace: float = 20) -> None:
        self.calls.append(("stop", (handle.name, grace)))

    def cleanup(self, handle: RunHandle) -> None:
        self.calls.append(("cleanup", handle))
        if not handle.keep and not self.remove_leaves:
            self.runs = [run for run in self.runs if run.handle.name != handle.name]

    def list_runs(self, labels: dict[str, str] | None = None) -> list[RunInfo]:
        wanted = (labels or {}).items()
        return [run for run in self.runs if all(run.labels.get(k) == v for k, v in wanted)]


class ReachingBackend(ListingBackend):
    """A fake that can also reach a run's ports and run commands in it."""

    supports_exec = True

    def endpoint(self, handle: RunHandle, port: int) -> str:
        return f"http://fake.invalid:{port}"

    def exec_argv(
        self,
        handle: RunHandle,
        command: Sequence[str],
        *,
        user: str | None = None,
        workdir: str | None = None,
        tty: bool = False,
        stdin: bool = False,
        env_names: Sequence[str] = (),
    ) -> list[str]:
        return ["echo", handle.name, *env_names, *command]


StructT = TypeVar("StructT", RunInfo, RunHandle)


def replaced(value: StructT, **changes: Any) -> StructT:
    """`value` with some fields changed."""
    return msgspec.structs.replace(value, **changes)
