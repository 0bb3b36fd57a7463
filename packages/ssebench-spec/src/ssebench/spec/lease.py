"""The runner's lease on its runs: who started a run, and whether that runner still lives.

Every run's containers carry the runner's identity as labels (`labels.LEASE`):
this machine's ID, its boot ID, the runner's PID and that process's start time.
A run's runner is dead when the machine is this one and either the boot ID
differs (the machine rebooted since) or no process with that PID and start
time exists. A run started on another machine is not judged by its PID: its
runner may be alive there. Where a run's tags can change (Kubernetes
annotations), the runner also renews `labels.LEASE_RENEWED` every
`RENEW_EVERY` seconds, and another machine's runner whose renewal is older than
`LEASE_TTL` is dead (clocks are assumed to agree within the margin between the
two). Stdlib only, read from /proc: one call costs a few file reads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Final, Literal

from ssebench.spec import labels

Liveness = Literal["alive", "dead", "elsewhere", "unleased"]
"""A runner's state: `elsewhere` started on another machine (not judged here),
`unleased` carries no lease (started before leases existed, or not by `ssebench run`)."""

RENEW_EVERY: Final = 15
"""Seconds between two renewals of a renewed lease."""

LEASE_TTL: Final = 90
"""Seconds after its last renewal a renewed lease is dead: six missed renewals, room for
a slow API server and clocks a little apart."""

_MACHINE_ID_FILES: Final = ("/etc/machine-id", "/var/lib/dbus/machine-id")
_BOOT_ID_FILE: Final = "/proc/sys/kernel/random/boot_id"


def _first_line(path: str) -> str | None:
    try:
        with Path(path).open(encoding="ascii") as file:
            return file.readline().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


@cache
def machine_id() -> str:
    """Where PIDs mean the same: this machine's ID (its boot ID where it has no
    machine-id file) and this process's PID namespace, so that a runner in another
    container, whose PIDs this process cannot see, is never taken for a dead one."""
    machine = next(filter(None, map(_first_line, _MACHINE_ID_FILES)), None) or boot_id()
    try:
        namespace = str(Path("/proc/self/ns/pid").readlink())
    except OSError:
        namespace = "pid:[unknown]"
    return f"{machine}/{namespace}"


@cache
def boot_id() -> str:
    """This machine's boot ID, `unknown` where the kernel does not offer one."""
    return _first_line(_BOOT_ID_FILE) or "unknown"


def process_start(pid: int) -> str | None:
    """When process `pid` started, in clock ticks since boot; None when it does not exist."""
    try:
        with Path(f"/proc/{pid}/stat").open("rb") as file:
            stat = file.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def current_lease() -> dict[str, str]:
    """The lease labels of this process, the runner."""
    pid = os.getpid()
    return {
        labels.LEASE_MACHINE: machine_id(),
        labels.LEASE_BOOT: boot_id(),
        labels.LEASE_PID: str(pid),
        labels.LEASE_START: process_start(pid) or "unknown",
    }


def renewal(now: datetime | None = None) -> dict[str, str]:
    """The tag a runner renews its lease with: `labels.LEASE_RENEWED` at `now` (UTC)."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return {labels.LEASE_RENEWED: moment.strftime("%Y-%m-%dT%H:%M:%SZ")}


def _expired(renewed: str) -> bool | None:
    """Whether a renewal is older than LEASE_TTL; None when it cannot be read."""
    try:
        moment = datetime.strptime(renewed, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return (datetime.now(UTC) - moment).total_seconds() > LEASE_TTL


def liveness(tags: Mapping[str, str]) -> Liveness:
    """Whether the runner named by a run's lease labels still lives.

    Args:
        tags: the run's labels.

    Returns:
        `alive`, `dead`, `elsewhere` (another machine's runner, whose lease is not
        renewed) or `unleased`.
    """
    machine = tags.get(labels.LEASE_MACHINE)
    pid = tags.get(labels.LEASE_PID, "")
    if machine is None or not pid.isdigit():
        return "unleased"
    if machine != machine_id():
        renewed = tags.get(labels.LEASE_RENEWED)
        expired = _expired(renewed) if renewed is not None else None
        if expired is None:
            return "elsewhere"
        return "dead" if expired else "alive"
    if tags.get(labels.LEASE_BOOT) != boot_id():
        return "dead"
    started = process_start(int(pid))
    return "alive" if started is not None and started == tags.get(labels.LEASE_START) else "dead"
