"""A run's limits (`RunSpec.resources`) as its pod's resources.

- CPUs and memory are the run container's limits: the kernel holds the
  container to them (CFS quota, cgroup memory.max; no swap, the kubelet gives
  containers none by default), so a memory hog in it is OOM-killed inside the
  limit. The agent's processes run at `oom_score_adj` 1000 (the entrypoint
  raises them). The kubelet starts the container at its Burstable value, 1000 -
  1000 x request / node memory (990 here), barely below: a fork bomb's small
  processes got a root service killed. So each container's root process lowers
  its own to 0 before it starts the others (`ROOT_OOM_SCORE_ADJ` in
  `ssebench.daemon._users`), and the kernel kills the agent first and the run
  is still graded.
- Requests are small (`REQUEST_CPU_MILLI`, `REQUEST_MEMORY`), not the limits: a
  run waits on its model most of the time, and requests equal to the limits
  would reserve 2 CPUs and 4 GiB per run, so a node would take a handful of runs
  where it can carry dozens. A cluster that wants reservations sets them with a
  LimitRange or ResourceQuota of the namespace.
- Processes: Kubernetes has no per-pod or per-container process limit in the
  API; the node's kubelet holds every pod to its `podPidsLimit`
  (KubeletConfiguration), which should stay well above the runs' `pids`
  (default 1024) and below what the node's `pid_max` can share. The run's own
  limit reaches each of its containers as `SSE_PIDS_LIMIT` (the runner's
  container environment), and the container's root process holds it: the
  entrypoint, and in sidecar mode the task container's supervisor, find their
  cgroup's `pids.max` unset and count the container's processes every 0.1 s,
  killing the agent's and the checks' processes past the limit
  (`ssebench.daemon._pids`); the run is then graded as after any agent that
  ended. The run records what it asked for in `config`.
- The keeper asks for little and has no limit: it only sleeps and reads.
"""

from __future__ import annotations

from typing import Final

from kubernetes import client

from ssebench.spec import Resources

REQUEST_CPU_MILLI: Final = 100
"""The CPU a run asks the scheduler for, in thousandths of a CPU (at most its limit)."""

REQUEST_MEMORY: Final = 256 * 1024**2
"""The memory a run asks the scheduler for, in bytes (at most its limit)."""


def requirements(limits: Resources | None) -> client.V1ResourceRequirements | None:
    """The run container's requests and limits; None (the cluster's defaults) without limits."""
    if limits is None:
        return None
    cpu = max(1, round(limits.cpus * 1000))
    return client.V1ResourceRequirements(
        limits={"cpu": f"{cpu}m", "memory": str(limits.memory)},
        requests={
            "cpu": f"{min(cpu, REQUEST_CPU_MILLI)}m",
            "memory": str(min(limits.memory, REQUEST_MEMORY)),
        },
    )
