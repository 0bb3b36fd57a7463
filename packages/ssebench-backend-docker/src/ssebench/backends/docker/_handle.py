"""What the Docker backend needs to find a run again."""

from __future__ import annotations

from ssebench.spec import RunHandle


class DockerRunHandle(RunHandle, kw_only=True, frozen=True):
    """A run on the Docker engine: its container, network and host results directory.

    A pair's `container_id` is its checker (the task container), which the run waits
    for, and `agent_container` the agent's; `pair` is the `ssebench.run` label its
    containers and volumes carry (`_pair.py`). `agent_timeout` (the run's `TIMEOUT`)
    marks a pair whose agent container the backend watches (`_agent_watch.py`); a pair
    started before that layout has none, and its agent container was the awaited one.
    """

    container_id: str
    network: str | None = None
    results_dir: str | None = None
    agent_container: str | None = None
    pair: str | None = None
    agent_timeout: float | None = None

    @property
    def awaited(self) -> str:
        """The container whose end is the run's: the checker (or the only container); the
        agent's in a sidecar pair of the earlier layout, which ran the entrypoint there."""
        if self.agent_timeout is not None:
            return self.container_id
        return self.agent_container or self.container_id
