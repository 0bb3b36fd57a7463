"""Run limits (defaults, a task's resources, the options) and the runner's lease."""

from __future__ import annotations

import os

import pytest

from ssebench.spec import (
    DEFAULT_RESOURCES,
    Resources,
    TaskResources,
    UserError,
    labels,
    run_resources,
)
from ssebench.spec.lease import current_lease, liveness


def test_the_defaults_fit_a_normal_task() -> None:
    assert run_resources(None) == DEFAULT_RESOURCES
    assert Resources(cpus=2.0, memory=4 * 1024**3, pids=1024) == DEFAULT_RESOURCES


def test_a_task_may_ask_for_more_never_for_less() -> None:
    asked = TaskResources(cpus=8, memory="16g", pids=100)

    assert run_resources(asked) == Resources(cpus=8.0, memory=16 * 1024**3, pids=1024)


def test_the_options_override_the_task_and_the_defaults() -> None:
    chosen = run_resources(TaskResources(memory="16g"), cpus=0.5, memory="512m", pids=64)

    assert chosen == Resources(cpus=0.5, memory=512 * 1024**2, pids=64)


@pytest.mark.parametrize(
    ("size", "expected"),
    [("4g", 4 * 1024**3), ("512M", 512 * 1024**2), ("1.5G", int(1.5 * 1024**3)),
     ("100000000", 100000000), ("2GiB", 2 * 1024**3), (1 << 30, 1 << 30)],
)  # fmt: skip
def test_memory_sizes(size: str | int, expected: int) -> None:
    assert run_resources(None, memory=size).memory == expected


@pytest.mark.parametrize(
    ("task", "said"),
    [
        (TaskResources(memory="lots"), "invalid task resources.memory 'lots'"),
        (TaskResources(cpus=-1), "invalid task resources.cpus -1"),
        (TaskResources(pids=1), "invalid task resources.pids 1: at least 32"),
    ],
)
def test_a_task_s_bad_resources_are_one_clear_error(task: TaskResources, said: str) -> None:
    with pytest.raises(UserError, match=said):
        run_resources(task)


def test_this_process_s_lease_is_alive() -> None:
    lease = current_lease()

    assert lease[labels.LEASE_PID] == str(os.getpid())
    assert liveness(lease) == "alive"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({labels.LEASE_START: "0"}, "dead"),  # the PID now belongs to another process
        ({labels.LEASE_BOOT: "an-earlier-boot"}, "dead"),  # the machine rebooted
        ({labels.LEASE_PID: str(2**22 + 1)}, "dead"),  # above the kernel's largest PID
        ({labels.LEASE_MACHINE: "another-machine"}, "elsewhere"),
    ],
)
def test_a_lease_is_judged_by_machine_boot_pid_and_start(
    change: dict[str, str], expected: str
) -> None:
    assert liveness({**current_lease(), **change}) == expected


def test_a_run_without_a_lease_is_never_judged() -> None:
    assert liveness({labels.RUN_ID: "r1"}) == "unleased"
    assert liveness({**current_lease(), labels.LEASE_PID: "not-a-pid"}) == "unleased"


def test_another_machine_s_renewed_lease_lives_until_it_expires() -> None:
    from datetime import UTC, datetime, timedelta

    from ssebench.spec.lease import LEASE_TTL, renewal

    elsewhere = {**current_lease(), labels.LEASE_MACHINE: "another-machine"}
    now = datetime.now(UTC)
    fresh = renewal(now - timedelta(seconds=LEASE_TTL - 30))
    stale = renewal(now - timedelta(seconds=LEASE_TTL + 30))

    assert liveness({**elsewhere, **fresh}) == "alive"
    assert liveness({**elsewhere, **stale}) == "dead"
    assert liveness({**elsewhere, labels.LEASE_RENEWED: "yesterday"}) == "elsewhere"
    # On this machine the runner's process decides, renewed or not.
    assert liveness({**current_lease(), **stale}) == "alive"
    assert liveness({**current_lease(), labels.LEASE_START: "0", **fresh}) == "dead"
