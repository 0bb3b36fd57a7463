"""What the Kubernetes backend needs to find a run again."""

from __future__ import annotations

from ssebench.spec import RunHandle, contract


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

    def helper_tool(self, name: str) -> str:
        """A program the backend runs in the keeper or the checker: the sealed runtime's
        (`contract.RUNTIME_TOOLS`) in a checker's pod, never one of an image's; by name
        in a pod of the earlier layout, whose images may not hold it."""
        return f"{contract.RUNTIME_TOOLS}/{name}" if self.agent_timeout is not None else name

    @property
    def awaited(self) -> str:
        """The container whose end is the run's."""
        return "task" if self.agent_timeout is not None else "run"
