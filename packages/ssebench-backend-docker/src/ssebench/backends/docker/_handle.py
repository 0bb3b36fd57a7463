"""What the Docker backend needs to find a run again."""

from __future__ import annotations

from ssebench.spec import RunHandle


class DockerRunHandle(RunHandle, kw_only=True, frozen=True):
    """A run on the Docker engine: its container, network and host results directory.

    A sidecar run's `container_id` is its task container; `agent_container` the one
    the run waits for, and `pair` the `ssebench.run` label its containers and volumes
    carry (`_pair.py`).
    """

    container_id: str
    network: str | None = None
    results_dir: str | None = None
    agent_container: str | None = None
    pair: str | None = None

    @property
    def awaited(self) -> str:
        """The container the run waits for: the agent's in sidecar mode, else the only one."""
        return self.agent_container or self.container_id
