"""Sidecar mode on the engine: a pair's volumes and containers, made and removed together.

A pair is two volumes and two containers, all labelled `ssebench.run=<pair id>`:

- the source volume (at the task's source path) and the sockets volume (at
  `/run/ssebench`), created first;
- the task container (`SidecarPair.environment_image`), started detached: the
  engine fills the empty source volume from the image (the project, owned by
  `model`), and the daemon binds `admin.sock` (0600) and `sse.sock` (0666) on the
  sockets volume, whose root it makes root's, 0711;
- the agent container (`RunSpec.image`), which the run waits for: its entrypoint
  waits for the daemon's socket, starts the MCP server, runs the agent and the
  evaluator. It joins the task container's network namespace, so both are on the
  run's network (none at all when restricted, the run's own bridge when open) with
  one policy, and it reaches the daemon's HTTP port 4263 on the task container at
  127.0.0.1.

The task container carries the run's labels (`ssebench runs` lists it, once per
run) and names its partner in `AGENT_CONTAINER_LABEL`; the agent container carries
the pair's label only. Whatever fails while starting, `remove_pair` leaves nothing.
"""

from __future__ import annotations

from typing import Final

import docker
from ssebench.backends.docker._errors import engine_errors
from ssebench.spec import PlatformNotFoundError, labels

AGENT_CONTAINER_LABEL: Final = "ssebench.agent-container"
"""Added by the Docker backend to a sidecar run's task container: its agent container."""

AGENT_TIMEOUT_LABEL: Final = "ssebench.agent-timeout"
"""On the checker of a pair whose agent container the backend watches: the run's TIMEOUT."""


def create_volumes(
    client: docker.DockerClient, names: list[str], pair: str, run_labels: dict[str, str]
) -> None:
    """Create a pair's volumes, labelled with the pair's ID and the run's labels.

    They are the first things of a run on the engine: with the run's labels (its
    runner's lease, its run directory) a runner that dies before the run's containers
    exist leaves volumes that `list_runs` shows and `runs reap` removes and records.

    Raises:
        BackendError: the engine refused (a volume of that name exists, ...).
    """
    for name in names:
        with engine_errors(f"creating volume {name}"):
            client.api.create_volume(name, driver="local", labels={**run_labels, labels.RUN: pair})


def remove_pair(client: docker.DockerClient, pair: str) -> None:
    """Remove every container, then every volume, labelled with the pair's ID.

    The agent container goes first: it uses the task container's network namespace.

    Raises:
        BackendError: something of the pair exists and cannot be removed.
    """
    filters = {"label": [f"{labels.RUN}={pair}"]}
    with engine_errors(f"listing the containers of run {pair}"):
        found = client.api.containers(all=True, filters=filters)
    found.sort(key=lambda summary: labels.RUN_ID in (summary.get("Labels") or {}))
    for summary in found:
        try:
            with engine_errors(f"removing a container of run {pair}"):
                client.api.remove_container(summary["Id"], force=True, v=True)
        except PlatformNotFoundError:
            pass
    with engine_errors(f"listing the volumes of run {pair}"):
        volumes = client.api.volumes(filters=filters).get("Volumes") or []
    for volume in volumes:
        try:
            with engine_errors(f"removing volume {volume['Name']}"):
                client.api.remove_volume(volume["Name"], force=True)
        except PlatformNotFoundError:
            pass
