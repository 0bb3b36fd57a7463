"""The `ssebench runs` tests drive the shared fake backend (ssebench.conformance.fake)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec

from ssebench.conformance.fake import SKIP, FakeBackend
from ssebench.spec import ContainerRole, RunHandle, RunInfo, RunState, labels

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


def seeded(backend: FakeBackendT, runs: Sequence[RunInfo] = ()) -> FakeBackendT:
    """`backend` with `runs` on its platform, each with three lines of output."""
    for run in runs:
        backend.add_run(run, output=[f"line {number} of {run.name}" for number in range(3)])
    return backend


def listing(runs: Sequence[RunInfo] = (), *, remove_leaves: bool = False) -> FakeBackend:
    """The shared fake holding `runs`; with `remove_leaves`, cleanup removes nothing."""
    backend = seeded(FakeBackend(), runs)
    if remove_leaves:
        backend.hooks["cleanup"] = lambda handle: SKIP
    return backend


class ReachingBackend(FakeBackend):
    """The shared fake, also reaching a run's ports and running commands in it."""

    supports_exec = True

    def endpoint(self, handle: RunHandle, port: int, container: ContainerRole = "task") -> str:
        return f"http://fake.invalid:{port}" + ("/agent" if container == "agent" else "")

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
        container: ContainerRole = "task",
    ) -> list[str]:
        return ["echo", handle.name, container, *env_names, *command]


def reaching(runs: Sequence[RunInfo] = ()) -> ReachingBackend:
    """A ReachingBackend holding `runs`."""
    return seeded(ReachingBackend(), runs)


def acts(backend: FakeBackend) -> list[tuple[str, Any]]:
    """What the commands asked the fake to do: logs (of a run's name), stop (name, grace),
    cleanup (the handle)."""
    shown: list[tuple[str, Any]] = []
    for method, args in backend.calls:
        if method == "logs":
            shown.append((method, args[0].name))
        elif method == "stop":
            shown.append((method, (args[0].name, args[1])))
        else:
            shown.append((method, args[0]))
    return shown


FakeBackendT = TypeVar("FakeBackendT", bound=FakeBackend)
StructT = TypeVar("StructT", RunInfo, RunHandle)


def replaced(value: StructT, **changes: Any) -> StructT:
    """`value` with some fields changed."""
    return msgspec.structs.replace(value, **changes)
