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

ALL: Final = (RUN_ID, WEBUI, TASK_ID, MODEL, AGENT, RESULTS, REFERENCE_RUN, RUN)
"""Every label name above."""
