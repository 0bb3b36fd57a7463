"""Sidecar mode in one pod: the task container joins the run's pod beside the agent's.

A sidecar run's pod is the sandbox pod (`_objects.job`) with, in addition:

- `source` and `sockets` emptyDir volumes in place of the pair's two volumes
  (`SidecarPair.volumes`): the project's source tree at `source_dir` and the
  daemon's sockets at `/run/ssebench`, mounted by both containers;
- an init container `source-fill` of the task image, which copies the image's own
  `source_dir` (owner, modes and all, `cp -a`) into the empty `source` volume: a
  Docker volume is filled from the image on its first mount, an emptyDir is not;
- the task container `task` (`SidecarPair.environment_image`, the daemon as
  PID 1, the pair's environment, which holds no secret), first in the pod's list
  so the kubelet starts it first; it mounts the results, archive, source and
  sockets volumes and never the run's Secret;
- the agent container is the sandbox pod's `run` container (`RunSpec.image`, the
  run's environment from its Secret), which the run waits for, with the source
  and sockets volumes added. Its entrypoint waits for the daemon's socket.

Both containers share the pod's network namespace (the agent reaches the daemon's
HTTP port at 127.0.0.1, and one NetworkPolicy governs the pair) but not its process
namespace: the agent never sees the daemon's processes. Nothing ends the task
container when the agent's ends, so it outlives it until `stop` or `cleanup`;
`stop` ends the agent's container first (it may still grade through the daemon),
then the task container, each with SIGTERM and, past the grace, its own kill file
(`task` has its own liveness probe on `control/kill-task`).
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kubernetes import client

from ssebench.backends.k8s import _objects as objects
from ssebench.spec import RunSpec, SidecarPair, contract

TASK_CONTAINER: Final = "task"
"""A sidecar run's task container: the daemon, the project and its toolchain."""

FILL_CONTAINER: Final = "source-fill"
"""The init container that copies the task image's source tree into the source volume."""

FILL_ROOT: Final = "/ssebench-fill"
"""Where `source-fill` mounts the source volume."""

KILL_TASK_FILE: Final = "kill-task"
"""In the control volume: ends the task container (its liveness probe fails on it)."""

SOURCE_VOLUME: Final = "source"
SOCKETS_VOLUME: Final = "sockets"

_FILL: Final = """
# A Docker volume is filled from the image on its first mount; an emptyDir is not.
# Copy the image's source tree, its own root's owner and modes included. An image
# without it leaves the volume empty, as Docker does.
if [ -d "$1" ]; then exec cp -a "$1/." "$2/"; fi
"""


def is_sidecar(pod: Any) -> bool:
    """Whether a pod is a sidecar run's (it has a task container)."""
    return any(container.name == TASK_CONTAINER for container in pod.spec.containers)


def _find(containers: list[Any], name: str) -> Any:
    return next(container for container in containers if container.name == name)


def _probe(run: Any, kill_file: str) -> Any:
    """The run container's liveness probe (`_objects.job`), on another kill file."""
    probe = copy.deepcopy(run.liveness_probe)
    probe._exec.command = ["/bin/sh", "-c", f"! test -e {objects.CONTROL_DIR}/{kill_file}"]
    return probe


def add_pair(job: client.V1Job, spec: RunSpec, pair: SidecarPair) -> None:
    """Turn the sandbox Job of `_objects.job` into the pair's (see the module's docstring)."""
    pod: Any = job.spec.template.spec  # type: ignore[union-attr]
    shared = [
        client.V1VolumeMount(name=SOURCE_VOLUME, mount_path=pair.source_dir),
        client.V1VolumeMount(name=SOCKETS_VOLUME, mount_path=contract.SOCKET_DIR),
    ]
    run = _find(pod.containers, objects.RUN_CONTAINER)
    run.volume_mounts = [*run.volume_mounts, *shared]
    task = client.V1Container(
        name=TASK_CONTAINER,
        image=pair.environment_image,
        image_pull_policy=objects.PULL_POLICY,
        env=[client.V1EnvVar(name=k, value=v) for k, v in pair.environment_env().items()],
        volume_mounts=[
            client.V1VolumeMount(name="results", mount_path=spec.results.target),
            client.V1VolumeMount(name="archive", mount_path=spec.archive.target),
            client.V1VolumeMount(name="control", mount_path=objects.CONTROL_DIR, read_only=True),
            *shared,
        ],
        security_context=client.V1SecurityContext(allow_privilege_escalation=False),
        liveness_probe=_probe(run, KILL_TASK_FILE),
        resources=run.resources,
    )
    fill = client.V1Container(
        name=FILL_CONTAINER,
        image=pair.environment_image,
        image_pull_policy=objects.PULL_POLICY,
        command=["/bin/sh", "-c", _FILL, "fill", pair.source_dir, FILL_ROOT],
        volume_mounts=[client.V1VolumeMount(name=SOURCE_VOLUME, mount_path=FILL_ROOT)],
        security_context=client.V1SecurityContext(allow_privilege_escalation=False, run_as_user=0),
    )
    pod.containers = [task, *pod.containers]
    pod.init_containers = [*(pod.init_containers or []), fill]
    pod.volumes = [
        *pod.volumes,
        client.V1Volume(name=SOURCE_VOLUME, empty_dir=client.V1EmptyDirVolumeSource()),
        client.V1Volume(name=SOCKETS_VOLUME, empty_dir=client.V1EmptyDirVolumeSource()),
    ]
