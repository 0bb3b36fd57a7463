"""A run's two containers in one pod: the checker (`task`) beside the agent's (`run`).

A run's pod is the Job of `_objects.job` with, in addition:

- `source` and `sockets` emptyDir volumes in place of the pair's two volumes
  (`SidecarPair.volumes`): the project's source tree at `source_dir` and the
  daemon's sockets at `/run/ssebench`, mounted by both containers;
- an init container `source-fill` of the checker's image, which copies the image's
  own `source_dir` (owner, modes and all, `cp -a`) into the empty `source` volume: a
  Docker volume is filled from the image on its first mount, an emptyDir is not;
- the checker `task` (`SidecarPair.environment_image`: the task's tool image,
  never the agent's), first in the pod's list so the kubelet starts it first: the
  entrypoint as root with `--agent-container` (it grades on the backend's report of
  the agent's end), the pair's environment (no secret), the results, archive,
  source and sockets volumes and the plugins; `RuntimeDefault` seccomp;
- the agent container is `_objects.job`'s `run` container (`RunSpec.image`, its
  environment from the run's Secret), started as `model` (uid 1000, no capability,
  no privilege escalation, `RuntimeDefault` seccomp) with SSEBench's launcher as its
  command, whatever the image says (it runs the agent's command, which the seal
  recorded in the image: `contract.AGENT_COMMAND_FILE`); it mounts the archive, source and
  sockets volumes and the reference patch (the reference agent's), never the
  results.

Both containers share the pod's network namespace (the agent reaches the daemon's
HTTP port and the MCP server at 127.0.0.1, and one NetworkPolicy governs the pair)
but not its process namespace: the agent never sees the checker's processes.
`stop` ends the agent's container first, then the checker, each with SIGTERM and,
past the grace, its own kill file (in a checker's pod the agent's kill file at once:
nothing is run in the agent container). The checker's liveness probe looks for
`control/kill-task`; the agent container's, in a checker's pod, is an HTTP request to
the port the checker serves (`contract.AGENT_ALIVE_PORT`, 503 once `control/kill`
exists: `entrypoint/_alive.py`), so no probe runs a program of the agent's image.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kubernetes import client

from ssebench.backends.k8s import _objects as objects
from ssebench.spec import RunSpec, SidecarPair, contract
from ssebench.spec._run import MODEL_KEY_ENV

TASK_CONTAINER: Final = "task"
"""A sidecar run's task container: the daemon, the project and its toolchain."""

FILL_CONTAINER: Final = "source-fill"
"""The init container that copies the task image's source tree into the source volume."""

FILL_ROOT: Final = "/ssebench-fill"
"""Where `source-fill` mounts the source volume."""

KILL_TASK_FILE: Final = "kill-task"
"""In the control volume: ends the task container (its liveness probe fails on it)."""

STARTUP_WAIT: Final = 60
"""Seconds the agent container waits for the checker to answer its probe (a busy node
starts the checker's Python slowly); past them the kubelet ends it."""

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


def _probe(run: Any, kill_file: str, shell: str) -> Any:
    """The run container's liveness probe (`_objects.job`), on another kill file."""
    probe = copy.deepcopy(run.liveness_probe)
    probe._exec.command = [shell, "-c", f"! test -e {objects.CONTROL_DIR}/{kill_file}"]
    return probe


def _asked_of_the_checker(probe: Any) -> tuple[Any, Any]:
    """The agent container's liveness and startup probes in a checker's pod: the kubelet's
    HTTP request to the port the checker serves (`contract.AGENT_ALIVE_PORT`), never a
    program of the agent's image. The startup probe gives the checker, which starts
    beside it, up to `STARTUP_WAIT` seconds to answer first."""
    ask = client.V1HTTPGetAction(path="/agent", port=contract.AGENT_ALIVE_PORT)
    liveness = copy.deepcopy(probe)
    liveness._exec = None
    liveness.http_get = ask
    # `stop` ends this container through the probe alone: the agent gets the default
    # grace between the kubelet's SIGTERM and SIGKILL.
    liveness.termination_grace_period_seconds = contract.STOP_GRACE
    startup = client.V1Probe(
        http_get=ask, period_seconds=1, failure_threshold=STARTUP_WAIT, timeout_seconds=5
    )
    return liveness, startup


def add_pair(job: client.V1Job, spec: RunSpec, pair: SidecarPair) -> None:
    """Turn the Job of `_objects.job` into the pair's (see the module's docstring)."""
    pod: Any = job.spec.template.spec  # type: ignore[union-attr]
    shared = [
        client.V1VolumeMount(name=SOURCE_VOLUME, mount_path=pair.source_dir),
        client.V1VolumeMount(name=SOCKETS_VOLUME, mount_path=contract.SOCKET_DIR),
    ]
    run = _find(pod.containers, objects.RUN_CONTAINER)
    plugins: list[Any] = []
    if pair.checker:
        plugins = [m for m in run.volume_mounts if m.mount_path == contract.PLUGINS_DIR]
        run.volume_mounts = [
            m for m in run.volume_mounts if m.name != "results" and m not in plugins
        ]
        run.working_dir = pair.source_dir
        # The launcher, whatever the image says, with no argument (with a command set, the
        # kubelet uses none of the image's CMD): it runs the agent's command the seal
        # recorded in the image, which the cluster's API cannot read.
        run.command = [*contract.LAUNCHER_COMMAND]
        run.security_context = client.V1SecurityContext(
            run_as_user=contract.MODEL_UID,
            run_as_group=contract.MODEL_UID,
            run_as_non_root=True,
            allow_privilege_escalation=False,
            capabilities=client.V1Capabilities(drop=["ALL"]),
            seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
        )
    run.volume_mounts = [*run.volume_mounts, *shared]
    task_env = [client.V1EnvVar(name=k, value=v) for k, v in pair.environment_env().items()]
    if pair.model_key:
        # The run's key for its `llm` plugins: the agent's references to the run's Secret.
        task_env += [e for e in run.env or [] if e.name in MODEL_KEY_ENV]
    # A checker's probe runs the sealed runtime's bash, never a program of the image.
    shell = f"{contract.RUNTIME_TOOLS}/bash" if pair.checker else "/bin/sh"
    task_probe = _probe(run, KILL_TASK_FILE, shell)
    if pair.checker:
        task_env.append(
            client.V1EnvVar(
                name=contract.ENV_AGENT_KILL_FILE,
                value=f"{objects.CONTROL_DIR}/{objects.KILL_FILE}",
            )
        )
        run.liveness_probe, run.startup_probe = _asked_of_the_checker(run.liveness_probe)
    task = client.V1Container(
        name=TASK_CONTAINER,
        image=pair.environment_image,
        image_pull_policy=objects.PULL_POLICY,
        command=[*contract.CHECKER_COMMAND] if pair.checker else None,
        env=task_env,
        volume_mounts=[
            client.V1VolumeMount(name="results", mount_path=spec.results.target),
            client.V1VolumeMount(name="archive", mount_path=spec.archive.target),
            client.V1VolumeMount(name="control", mount_path=objects.CONTROL_DIR, read_only=True),
            *shared,
            *plugins,
        ],
        security_context=client.V1SecurityContext(
            allow_privilege_escalation=False,
            seccomp_profile=(
                client.V1SeccompProfile(type="RuntimeDefault") if pair.checker else None
            ),
        ),
        liveness_probe=task_probe,
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
    if pair.checker:
        # The helpers run the checker's image, never the agent's, and the keeper the
        # sealed runtime's programs in it, never the image's.
        for helper in (*pod.init_containers, *pod.containers):
            if helper.name in (objects.KEEPER_CONTAINER, objects.POLICY_WAIT_CONTAINER):
                helper.image = pair.environment_image
            if helper.name == objects.KEEPER_CONTAINER:
                helper.command = [f"{contract.RUNTIME_TOOLS}/sleep", "infinity"]
