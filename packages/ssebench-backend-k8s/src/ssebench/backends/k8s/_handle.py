"""What the Kubernetes backend needs to find a run again."""

from __future__ import annotations

from ssebench.spec import RunHandle


class K8sRunHandle(RunHandle, kw_only=True, frozen=True):
    """A run on a cluster: its namespace, its Job (`name`) and the Job's one pod."""

    namespace: str
    pod: str
    results_dir: str | None = None
    sidecar: bool = False
    """Its pod has a task container (the checker) beside the agent's (`_sidecar`)."""
    agent_timeout: float | None = None
    """The run's TIMEOUT, on a pod whose agent container the backend watches and whose
    checker it tells of the agent's end (`_agent_watch`); None for a pod of the earlier
    layout, whose `run` container ran the entrypoint and was the awaited one."""

    @property
    def awaited(self) -> str:
        """The container whose end is the run's."""
        return "task" if self.agent_timeout is not None else "run"
