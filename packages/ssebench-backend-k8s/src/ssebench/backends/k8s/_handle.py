"""What the Kubernetes backend needs to find a run again."""

from __future__ import annotations

from ssebench.spec import RunHandle


class K8sRunHandle(RunHandle, kw_only=True, frozen=True):
    """A run on a cluster: its namespace, its Job (`name`) and the Job's one pod."""

    namespace: str
    pod: str
    results_dir: str | None = None
    sidecar: bool = False
    """A sidecar run: its pod has a task container beside the agent's (`_sidecar`)."""
