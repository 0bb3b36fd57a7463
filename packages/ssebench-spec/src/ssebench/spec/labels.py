"""Label names that mark SSEBench's containers, volumes and networks."""

from __future__ import annotations

from typing import Final

PREFIX: Final = "ssebench."
"""Every SSEBench label starts with this."""

RUN_ID: Final = "ssebench.run-id"
"""The run's ID."""

WEBUI: Final = "ssebench.webui"
"""`true` on the container `ssebench runs list` and the web UI list."""

TASK_ID: Final = "ssebench.task-id"
"""The task."""

MODEL: Final = "ssebench.model"
"""The model, or `none`."""

AGENT: Final = "ssebench.agent"
"""The agent."""

RESULTS: Final = "ssebench.results"
"""The run directory on the runner's host."""

REFERENCE_RUN: Final = "ssebench.reference-run"
"""`true` for a reference run only."""

RUN: Final = "ssebench.run"
"""The ID of a sidecar pair, carried by both its containers and its volumes."""


# The lease (issue 23): who started a run, so `ssebench runs reap` can tell a live
# runner's runs from a dead one's. Docker labels cannot change after creation, so the
# lease is the runner's identity, checked for liveness; Kubernetes annotations can, so
# there the runner also renews a time (LEASE_RENEWED).

LEASE_MACHINE: Final = "ssebench.lease.machine"
"""The runner's host: its /etc/machine-id (stable across reboots) and PID namespace."""

LEASE_BOOT: Final = "ssebench.lease.boot"
"""The runner host's boot ID (/proc/sys/kernel/random/boot_id): changes on every boot."""

LEASE_PID: Final = "ssebench.lease.pid"
"""The runner's process ID."""

LEASE_START: Final = "ssebench.lease.start"
"""The runner process's start time in clock ticks since boot (/proc/<pid>/stat field 22),
so a reused PID is not taken for the runner."""

LEASE_RENEWED: Final = "ssebench.lease.renewed"
"""When the runner last renewed its lease (UTC, ISO 8601), where a run's tags can change
(a Kubernetes annotation, renewed every `lease.RENEW_EVERY` seconds while the runner
lives): a runner on another machine is dead once it is `lease.LEASE_TTL` seconds old."""

LEASE: Final = (LEASE_MACHINE, LEASE_BOOT, LEASE_PID, LEASE_START, LEASE_RENEWED)
"""Every lease label."""

ALL: Final = (RUN_ID, WEBUI, TASK_ID, MODEL, AGENT, RESULTS, REFERENCE_RUN, RUN, *LEASE)
"""Every label name above."""
