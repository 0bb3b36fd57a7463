"""What the Docker backend needs to find a run again."""

from __future__ import annotations

from ssebench.spec import RunHandle


class DockerRunHandle(RunHandle, kw_only=True, frozen=True):
    """A run on the Docker engine: its container, network and host results directory."""

    container_id: str
    network: str | None = None
    results_dir: str | None = None
