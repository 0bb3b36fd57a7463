"""Reading runs back from the engine: one list query per kind, turned into RunInfo."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from ssebench.backends.docker._handle import DockerRunHandle
from ssebench.backends.docker._pair import AGENT_CONTAINER_LABEL, AGENT_TIMEOUT_LABEL
from ssebench.spec import RunInfo, RunState, labels

KEEP_LABEL: Final = "ssebench.keep"
"""Added by the Docker backend: `true` for a run started with keep."""

NETWORK_LABEL: Final = "ssebench.network"
"""Added by the Docker backend: the run's own network."""

_STATES: Final[dict[str, RunState]] = {
    "created": "created",
    "running": "running",
    "paused": "running",
    "restarting": "running",
    "removing": "exited",
    "exited": "exited",
    "dead": "exited",
}
_EXIT_CODE = re.compile(r"^Exited \((-?\d+)\)")


RUN_ID_LABEL: Final = labels.RUN_ID


def label_filters(wanted: dict[str, str] | None) -> dict[str, list[str]]:
    """The engine's filter for what carries every label in `wanted` ("": any value)."""
    return {"label": [f"{key}={value}" if value else key for key, value in (wanted or {}).items()]}


def made_first_filters(wanted: dict[str, str] | None) -> dict[str, list[str]]:
    """The engine's filter for the volumes and networks of the runs `wanted` names: those
    carrying the run's ID label (`unstarted_runs`), of the one run when it names one."""
    return label_filters({RUN_ID_LABEL: "", **(wanted or {})})


def is_partner(summary: dict[str, Any]) -> bool:
    """Whether a container is a sidecar run's agent container, which lists as its task's."""
    tags: dict[str, str] = summary.get("Labels") or {}
    return labels.RUN in tags and labels.RUN_ID not in tags


def run_info(summary: dict[str, Any]) -> RunInfo:
    """A RunInfo from one entry of the engine's container list (no per-container query)."""
    tags: dict[str, str] = summary.get("Labels") or {}
    names: list[str] = summary.get("Names") or []
    name = names[0].lstrip("/") if names else summary["Id"][:12]
    state = _STATES.get(summary.get("State", ""), "unknown")
    exit_code = None
    if state == "exited":
        match = _EXIT_CODE.match(summary.get("Status", ""))
        exit_code = int(match.group(1)) if match else None
    created = summary.get("Created")
    run_id = tags.get(labels.RUN_ID, "")
    return RunInfo(
        run_id=run_id,
        name=name,
        state=state,
        image=summary.get("Image", ""),
        exit_code=exit_code,
        labels=tags,
        created_at=(
            datetime.fromtimestamp(created, UTC).isoformat().replace("+00:00", "Z")
            if isinstance(created, int | float)
            else None
        ),
        handle=DockerRunHandle(
            run_id=run_id,
            name=name,
            keep=tags.get(KEEP_LABEL) == "true",
            container_id=summary["Id"],
            network=tags.get(NETWORK_LABEL),
            results_dir=tags.get(labels.RESULTS),
            agent_container=tags.get(AGENT_CONTAINER_LABEL),
            pair=tags.get(labels.RUN),
            agent_timeout=_seconds(tags.get(AGENT_TIMEOUT_LABEL)),
        ),
    )


def unstarted_runs(
    volumes: list[dict[str, Any]], networks: list[dict[str, Any]], started: set[str]
) -> list[RunInfo]:
    """The runs whose volumes or network are on the engine but not their containers.

    Their runner died between making those and starting the run (or is in between
    now): with the run's labels on them (its lease included) the reaper removes and
    records such a run as it does a started one.
    """
    found: dict[str, RunInfo] = {}
    for kind, summaries in (("volume", volumes), ("network", networks)):
        for summary in summaries:
            tags: dict[str, str] = summary.get("Labels") or {}
            run_id = tags.get(labels.RUN_ID, "")
            if not run_id or run_id in started:
                continue
            network = summary["Name"] if kind == "network" else None
            known = found.get(run_id)
            if known is not None:
                if network is not None:
                    handle = msgspec.structs.replace(known.handle, network=network, name=network)
                    found[run_id] = msgspec.structs.replace(known, name=network, handle=handle)
                continue
            name = network or f"ssebench-{run_id}"
            created = str(summary.get("CreatedAt" if kind == "volume" else "Created") or "")
            found[run_id] = RunInfo(
                run_id=run_id,
                name=name,
                state="created",
                image="",
                labels=tags,
                created_at=f"{created[:19]}Z" if len(created) >= 19 else None,
                handle=DockerRunHandle(
                    run_id=run_id,
                    name=name,
                    container_id="",
                    network=network,
                    results_dir=tags.get(labels.RESULTS),
                    pair=tags.get(labels.RUN),
                ),
            )
    return list(found.values())


def _seconds(value: str | None) -> float | None:
    """A label's number of seconds; None when absent or not a number."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
