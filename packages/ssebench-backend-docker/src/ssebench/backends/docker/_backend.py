"""DockerBackend: runs on the local Docker engine through the docker SDK."""

from __future__ import annotations

import io
import logging
import secrets
import shutil
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final

from typing_extensions import override

import docker
import docker.models.networks
import docker.types
from ssebench.backends.docker._agent_watch import report, watch_agent, write_agent_log
from ssebench.backends.docker._egress import bridge_name, ensure_host_guard
from ssebench.backends.docker._engine import docker_client
from ssebench.backends.docker._errors import CopyFromImageError, engine_errors
from ssebench.backends.docker._gateway import DockerGateway
from ssebench.backends.docker._handle import DockerRunHandle
from ssebench.backends.docker._image_files import ImageFileCache
from ssebench.backends.docker._pair import (
    AGENT_CONTAINER_LABEL,
    AGENT_TIMEOUT_LABEL,
    create_volumes,
    remove_pair,
)
from ssebench.backends.docker._runs import (
    KEEP_LABEL,
    NETWORK_LABEL,
    is_partner,
    label_filters,
    made_first_filters,
    run_info,
    unstarted_runs,
)
from ssebench.backends.docker._streams import join_relay, split_lines, start_relay
from ssebench.spec import (
    Backend,
    BackendError,
    ContainerRole,
    Egress,
    ImageRequest,
    Images,
    ModelsFile,
    Mount,
    PlatformNotFoundError,
    PlatformRefusedError,
    PlatformTimeoutError,
    Resources,
    RunInfo,
    RunSpec,
    RunTimeoutError,
    SidecarPair,
    Task,
    contract,
    labels,
    refuse_in_agent_container,
)
from ssebench.spec.atomic import write_atomically
from ssebench.spec.streams import merge_lines

_POLL_SECONDS: Final = 0.2

log = logging.getLogger(__name__)


NO_NETWORK: Final = "none"
"""The engine's name for a container's network mode without any network."""

LOG_CONFIG: Final = {"max-size": "32m", "max-file": "4"}
"""The engine's log of a run (json-file, which `runs logs` reads back, rotated files
included) is kept to 4 files of 32 MiB: a second bound, after the entrypoint's cap
(`contract.AGENT_OUTPUT_LIMIT`), on what the agent's output costs the host's disk
(docs/integrity.md, "What reaches the host is tamed": output capped)."""


def _create_network(
    client: docker.DockerClient, name: str, run_labels: dict[str, str], egress: Egress
) -> docker.models.networks.Network:
    """A run's own network: internal (and guarded by the host rule) when restricted.

    `run_labels` carry the run's ID and, when made before the run's containers, the
    run's labels, so that what a runner killed in between leaves is found (`list_runs`).
    """
    with engine_errors(f"creating network {name}"):
        return client.networks.create(
            name,
            driver="bridge",
            internal=egress == "restricted",
            labels={**run_labels, NETWORK_LABEL: name},
            options={"com.docker.network.bridge.name": bridge_name(egress)},
        )


def _own_labels(spec: RunSpec) -> dict[str, str]:
    """The labels of everything a run makes on the engine: the run's, with its ID."""
    return {**spec.labels, labels.RUN_ID: spec.run_id}


def _mount(mount: Mount) -> docker.types.Mount:
    return docker.types.Mount(
        target=mount.target, source=mount.source, type=mount.kind, read_only=mount.read_only
    )


def _mounts(spec: RunSpec) -> list[docker.types.Mount]:
    return [_mount(spec.results), _mount(spec.archive), *map(_mount, spec.artifacts)]


def _host_config(
    client: docker.DockerClient,
    mounts: list[docker.types.Mount],
    network_mode: str,
    limits: Resources | None,
) -> dict[str, object]:
    """A run's container: its mounts and network, no new privileges, its limits, its log
    bounded. A sidecar run's two containers each get the run's limits."""
    config: dict[str, object] = client.api.create_host_config(
        mounts=mounts,
        network_mode=network_mode,
        security_opt=["no-new-privileges"],
        # The run's limits (None: the engine's own, no limit). Swap is the memory limit
        # itself: no swap beyond it, so a hog meets the limit at once instead of
        # thrashing the host's disk.
        nano_cpus=round(limits.cpus * 1e9) if limits else None,
        mem_limit=limits.memory if limits else None,
        memswap_limit=limits.memory if limits else None,
        pids_limit=limits.pids if limits else None,
        log_config=docker.types.LogConfig(
            type=docker.types.LogConfig.types.JSON, config=dict(LOG_CONFIG)
        ),
    )
    return config


def _networked(spec: RunSpec) -> bool:
    """Whether the run gets a network of its own.

    A restricted run starts with no network at all: with only a loopback interface
    it reaches nothing, and it costs no bridge, no firewall rules and no DNS set-up.
    Its own network is made when something must reach it (`endpoint`), under the
    label it would have, so cleanup finds it. A run that may use a model starts on
    its own network (internal and guarded when restricted) with the model gateway
    on it, and nothing else (see _gateway.py).
    """
    return spec.network.egress != "restricted" or spec.network.model_proxy


def _run_network(
    client: docker.DockerClient, spec: RunSpec, network_name: str
) -> docker.models.networks.Network | None:
    """Make the run's network if it gets one (`_networked`), with the gateway on it."""
    if not _networked(spec):
        return None
    if spec.network.egress == "restricted":
        ensure_host_guard()
    network = _create_network(client, network_name, _own_labels(spec), spec.network.egress)
    if spec.network.model_proxy:
        gateway = DockerGateway(client)
        # The run finds it by its alias on the run's network (the engine's DNS), which
        # follows it should it be restarted. The run's key works from the run's own
        # network only.
        _, subnet = gateway.connect(network_name)
        gateway.store.bind(spec.run_id, subnet)
    return network


def _checker_command(pair: SidecarPair) -> dict[str, Any]:
    """The checker's PID 1: SSEBench's entrypoint, whatever the image says."""
    if not pair.checker:
        return {}
    return {"entrypoint": [*contract.CHECKER_COMMAND], "command": []}


def _launcher(pair: SidecarPair) -> dict[str, Any]:
    """The agent container of a checker's pair: `model` from the first instruction, in the
    source tree, SSEBench's launcher as PID 1 whatever the image says, with no argument
    (it runs the agent's command the seal recorded; the image's CMD is not used)."""
    return {
        "user": f"{contract.MODEL_UID}:{contract.MODEL_UID}",
        "entrypoint": [*contract.LAUNCHER_COMMAND],
        "command": [],
        "working_dir": pair.source_dir,
    }


class DockerBackend(Backend[DockerRunHandle]):
    """Runs each run as one container on its own network of the local Docker engine;
    a sidecar run as a pair of containers with two volumes (`_pair.py`)."""

    name: ClassVar[str] = "docker"
    builds_images: ClassVar[bool] = True
    supports_exec: ClassVar[bool] = True

    def __init__(self) -> None:
        self._engine: docker.DockerClient | None = None
        self._engine_lock = threading.Lock()

    def _client(self) -> docker.DockerClient:
        # One client for the backend's life (the relay and stop threads share it):
        # a new one costs a connection and a ping, several times per run.
        with self._engine_lock:
            if self._engine is None:
                self._engine = docker_client()
            return self._engine

    @override
    def prepare_images(self, request: ImageRequest) -> Images:
        from ssebench.backends.docker._prepare import prepare_run_images

        return prepare_run_images(self._client(), request)

    def publish_cases(
        self, tasks: Sequence[Task], *, force: bool, say: Callable[[str], None]
    ) -> dict[str, str]:
        """Build and push each task's case image (`CasePublisher`, `ssebench dataset publish`).

        Raises:
            UserError: as `_catalog.publish_cases`.
            BackendError: the engine cannot be reached.
        """
        from ssebench.backends.docker._catalog import publish_cases
        from ssebench.backends.docker._prepare import StepPrinter

        printer = StepPrinter()
        try:
            return publish_cases(self._client(), tasks, force=force, progress=printer, say=say)
        finally:
            printer.flush()

    @override
    def probe_image(
        self, image: str, argv: Sequence[str], env: dict[str, str], timeout: float = 600
    ) -> bytes:
        from ssebench.backends.docker._probe import probe_image

        return probe_image(self._client(), image, argv, env, timeout)

    @override
    def copy_from_image(
        self, image: str, path: str, dest: Path, platform: str | None = None
    ) -> None:
        client = self._client()
        what = f"copying {path} out of {image}"
        with engine_errors(what, family=CopyFromImageError):
            image_id = str(client.images.get(image).id)
        cache = ImageFileCache()
        data = cache.read(image_id, path)
        if data is None:
            data = self._read_from_image(client, image, image_id, path, platform)
            cache.write(image_id, path, data)
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(dest, data)
        except OSError as exc:
            raise CopyFromImageError(f"{what} failed: cannot write {dest}: {exc}") from exc

    @staticmethod
    def _read_from_image(
        client: docker.DockerClient, image: str, image_id: str, path: str, platform: str | None
    ) -> bytes:
        container = None
        with engine_errors(f"copying {path} out of {image}", family=CopyFromImageError):
            try:
                container = client.api.create_container(
                    image_id,
                    command=["true"],
                    platform=platform,
                    labels={labels.PREFIX + "copy": "true"},
                )
                chunks, _ = client.api.get_archive(container["Id"], path)
                archive = io.BytesIO(b"".join(chunks))
            finally:
                if container is not None:
                    client.api.remove_container(container["Id"], force=True)
        try:
            with tarfile.open(fileobj=archive) as tar:
                member = next((m for m in tar.getmembers() if m.isfile()), None)
                source = tar.extractfile(member) if member is not None else None
                if source is None:
                    raise CopyFromImageError(f"{path} in {image} is not a regular file")
                return source.read()
        except tarfile.TarError as exc:
            raise CopyFromImageError(f"the engine sent no archive of {path}: {exc}") from exc

    @override
    def start(self, spec: RunSpec) -> DockerRunHandle:
        if spec.sidecar is not None:
            return self._start_pair(spec, spec.sidecar)
        client = self._client()
        hidden = list(spec.env.values())
        suffix = secrets.token_hex(3)
        network_name = f"ssebench-{spec.run_id}-{suffix}"
        container_name = f"ssebench-{spec.run_id}-{suffix}"
        networked = _networked(spec)
        own_labels = {labels.RUN_ID: spec.run_id, NETWORK_LABEL: network_name}
        network = None
        container_id = None
        try:
            # An image the engine cannot find is the run failing to start (BackendError).
            with engine_errors(f"starting run {spec.run_id}", hidden, family=BackendError):
                network = _run_network(client, spec, network_name)
                container_id = client.api.create_container(
                    spec.image,
                    name=container_name,
                    environment=dict(spec.env),
                    labels={
                        **spec.labels,
                        **own_labels,
                        KEEP_LABEL: "true" if spec.keep else "false",
                    },
                    host_config=_host_config(
                        client,
                        _mounts(spec),
                        network_name if networked else NO_NETWORK,
                        spec.resources,
                    ),
                    platform=spec.platform,
                    stop_signal="SIGTERM",
                )["Id"]
                start_relay(client, container_id)
                client.api.start(container_id)
        except BaseException:
            self._remove(client, container_id, network.name if network is not None else None)
            raise
        return DockerRunHandle(
            run_id=spec.run_id,
            name=container_name,
            keep=spec.keep,
            container_id=container_id,
            network=network_name,
            results_dir=spec.results.source,
        )

    def _start_pair(self, spec: RunSpec, pair: SidecarPair) -> DockerRunHandle:
        """A run's two containers (`_pair.py`): the environment's, then the agent's at once.

        With `pair.checker` the environment container is the checker and the agent's
        runs the launcher as `model` (`SidecarPair`); otherwise both run their images'
        entrypoints and share every mount.
        """
        client = self._client()
        hidden = list(spec.env.values())
        suffix = secrets.token_hex(3)
        network_name = f"ssebench-{spec.run_id}-{suffix}"
        task_name = f"ssebench-{spec.run_id}-{suffix}"
        agent_name = f"{task_name}-agent"
        networked = _networked(spec)
        pair_label = {labels.RUN: pair.run_id}
        shared = [*pair.volumes, spec.archive]
        # The checker's: the results and the plugins; the agent's: the reference patch.
        to_agent = [m for m in spec.artifacts if m.target == contract.REFERENCE_PATCH]
        to_checker = [spec.results, *(m for m in spec.artifacts if m not in to_agent)]
        if not pair.checker:
            to_agent, to_checker = [spec.results, *spec.artifacts], [spec.results]
        task_id = agent_id = None
        network = None
        try:
            with engine_errors(f"starting run {spec.run_id}", hidden, family=BackendError):
                create_volumes(
                    client, [m.source for m in pair.volumes], pair.run_id, _own_labels(spec)
                )
                # The agent container shares the checker's network namespace, so the
                # pair has one egress policy and both reach the gateway, if any.
                network = _run_network(client, spec, network_name)
                task_id = client.api.create_container(
                    pair.environment_image,
                    name=task_name,
                    environment=pair.environment_env(spec.env),
                    labels={
                        **spec.labels,
                        labels.RUN_ID: spec.run_id,
                        NETWORK_LABEL: network_name,
                        KEEP_LABEL: "true" if spec.keep else "false",
                        AGENT_CONTAINER_LABEL: agent_name,
                        **({AGENT_TIMEOUT_LABEL: str(spec.timeout)} if pair.checker else {}),
                        **pair_label,
                    },
                    host_config=_host_config(
                        client,
                        [_mount(m) for m in (*to_checker, *shared)],
                        network_name if networked else NO_NETWORK,
                        spec.resources,
                    ),
                    platform=spec.platform,
                    stop_signal="SIGTERM",
                    **_checker_command(pair),
                )["Id"]
                if pair.checker:
                    start_relay(client, task_id)
                client.api.start(task_id)
                agent_host = _host_config(
                    client,
                    [_mount(m) for m in (*to_agent, *shared)],
                    f"container:{task_id}",
                    spec.resources,
                )
                if pair.checker:
                    agent_host["CapDrop"] = ["ALL"]
                agent_id = client.api.create_container(
                    spec.image,
                    name=agent_name,
                    environment=dict(spec.env),
                    labels=pair_label,
                    host_config=agent_host,
                    platform=spec.platform,
                    stop_signal="SIGTERM",
                    **(_launcher(pair) if pair.checker else {}),
                )["Id"]
                start_relay(client, agent_id)
                client.api.start(agent_id)
        except BaseException:
            for container in (agent_id, task_id):
                if container is not None:
                    join_relay(container, timeout=0)
            self._remove_pair(client, pair.run_id, network.name if network is not None else None)
            raise
        return DockerRunHandle(
            run_id=spec.run_id,
            name=task_name,
            keep=spec.keep,
            container_id=task_id,
            network=network_name,
            results_dir=spec.results.source,
            agent_container=agent_id,
            pair=pair.run_id,
            agent_timeout=float(spec.timeout) if pair.checker else None,
        )

    @override
    def wait(self, handle: DockerRunHandle, timeout: float | None = None) -> int:
        client = self._client()
        if handle.agent_timeout is not None and handle.agent_container is not None:
            deadline = None if timeout is None else time.monotonic() + timeout
            self._end_agent_phase(client, handle, deadline)
            if deadline is not None:
                timeout = max(1.0, deadline - time.monotonic())
        if handle.keep:
            return self._wait_for_grade(client, handle, timeout)
        try:
            with engine_errors(f"waiting for run {handle.run_id}"):
                status = client.api.wait(
                    handle.awaited, timeout=None if timeout is None else max(1, round(timeout))
                )
        except PlatformTimeoutError as exc:
            # The engine holds the answer until the container exits: no answer is the run's time.
            raise RunTimeoutError(f"run {handle.run_id} did not finish in {timeout}s") from exc
        join_relay(handle.awaited)
        return int(status["StatusCode"])

    @staticmethod
    def _end_agent_phase(
        client: docker.DockerClient, handle: DockerRunHandle, deadline: float | None
    ) -> None:
        """Wait for the agent container's agent to end, copy its output to agent.log, tell
        the checker (`_agent_watch.py`)."""
        assert handle.agent_container is not None and handle.agent_timeout is not None
        try:
            status = watch_agent(
                client, handle.agent_container, handle.container_id, handle.agent_timeout, deadline
            )
        except RunTimeoutError as exc:
            raise RunTimeoutError(f"run {handle.run_id}: {exc}") from exc
        if not handle.keep:
            join_relay(handle.agent_container)
        if handle.results_dir is not None:
            write_agent_log(client, handle.agent_container, handle.results_dir)
        if status is not None:
            report(client, handle.container_id, status)

    def _wait_for_grade(
        self, client: docker.DockerClient, handle: DockerRunHandle, timeout: float | None
    ) -> int:
        # A kept container never exits by itself: the run is over once the
        # entrypoint has written the grade marker (after result.json).
        deadline = None if timeout is None else time.monotonic() + timeout
        marker = Path(handle.results_dir or "/nonexistent") / contract.GRADED_MARKER
        while True:
            if marker.exists():
                return 0
            with engine_errors(f"watching run {handle.run_id}"):
                state = client.api.inspect_container(handle.awaited)["State"]
            if not state.get("Running") and state.get("Status") != "created":
                join_relay(handle.awaited)
                return int(state.get("ExitCode", 0))
            if deadline is not None and time.monotonic() > deadline:
                raise RunTimeoutError(f"run {handle.run_id} was not graded in {timeout}s")
            time.sleep(_POLL_SECONDS)

    @override
    def logs(self, handle: DockerRunHandle, follow: bool = False) -> Iterator[str]:
        """The run's output: a checker's pair shows the agent container's, then the
        checker's (both as they come when following)."""
        if not handle.container_id:
            raise BackendError(
                f"run {handle.run_id} has no output: its runner ended before making its "
                "containers (`ssebench runs reap` removes what it left)"
            )
        client = self._client()
        containers = [handle.awaited]
        if handle.agent_timeout is not None and handle.agent_container is not None:
            containers = [handle.agent_container, handle.container_id]
        streams = []
        with engine_errors(f"reading the output of run {handle.run_id}"):
            for container in containers:
                chunks = client.api.logs(
                    container, stdout=True, stderr=True, stream=True, follow=follow
                )
                streams.append(split_lines(chunks))
        if follow and len(streams) > 1:
            yield from merge_lines(streams)
            return
        for stream in streams:
            with engine_errors(f"reading the output of run {handle.run_id}"):
                yield from stream

    @override
    def collect_results(self, handle: DockerRunHandle, dest: Path) -> None:
        # The run directory is bind-mounted: what the container wrote is already in dest.
        return None

    @override
    def stop(self, handle: DockerRunHandle, grace: float = contract.STOP_GRACE) -> None:
        client = self._client()
        # A pair's agent container first: the checker records the stop when it ends. A run
        # whose runner ended before making its containers has nothing to stop.
        for container in dict.fromkeys((handle.agent_container, handle.container_id)):
            if not container:
                continue
            try:
                with engine_errors(f"stopping run {handle.run_id}"):
                    client.api.stop(container, timeout=max(0, round(grace)))
            except PlatformNotFoundError:
                continue

    @override
    def cleanup(self, handle: DockerRunHandle) -> None:
        if handle.keep:
            return
        self.remove(handle)

    @override
    def remove(self, handle: DockerRunHandle) -> None:
        """Remove everything of a run, kept or not, running or not."""
        client = self._client()
        if handle.pair is not None:
            for container in (handle.agent_container, handle.container_id):
                if container:
                    join_relay(container, timeout=0)
            self._remove_pair(client, handle.pair, handle.network)
            return
        # An unstarted run (`unstarted_runs`) has no container.
        self._remove(client, handle.container_id or None, handle.network)

    @classmethod
    def _remove_pair(cls, client: docker.DockerClient, pair: str, network: str | None) -> None:
        remove_pair(client, pair)
        cls._remove(client, None, network)

    @staticmethod
    def _remove(client: docker.DockerClient, container_id: str | None, network: str | None) -> None:
        if container_id is not None:
            join_relay(container_id, timeout=0)
            try:
                with engine_errors("removing a run's container"):
                    client.api.remove_container(container_id, force=True, v=True)
            except PlatformNotFoundError:
                pass
        if network is not None:
            # The model gateway is on a model run's network: take it off first.
            DockerGateway(client).disconnect(network)
            try:
                with engine_errors(f"removing network {network}"):
                    client.api.remove_network(network)
            except PlatformNotFoundError:
                pass

    @override
    def gateway(self, models: ModelsFile) -> DockerGateway:
        gateway = DockerGateway(self._client(), reservation=models.reservation)
        gateway.up(models, say=log.info)
        return gateway

    @override
    def list_runs(self, labels: dict[str, str] | None = None) -> list[RunInfo]:
        client = self._client()
        # Also what a run has on the engine before its containers (`unstarted_runs`).
        made_first = made_first_filters(labels)
        with engine_errors("listing runs"):
            found = client.api.containers(all=True, filters=label_filters(labels))
            volumes = client.api.volumes(filters=made_first).get("Volumes") or []
            networks = client.api.networks(filters=made_first)
        runs = [run_info(summary) for summary in found if not is_partner(summary)]
        runs += unstarted_runs(volumes, networks, {run.run_id for run in runs})
        return sorted(runs, key=lambda run: run.created_at or "", reverse=True)

    @override
    def endpoint(
        self, handle: DockerRunHandle, port: int, container: ContainerRole = "task"
    ) -> str:
        # A pair's agent container has the task container's network namespace, so
        # the same address reaches both (`container` chooses nothing more here).
        client = self._client()
        with engine_errors(f"finding run {handle.run_id}"):
            attrs = client.api.inspect_container(handle.container_id)
            # A pair runs while its agent container does (the task container outlives it).
            awaited = attrs
            if handle.awaited != handle.container_id:
                awaited = client.api.inspect_container(handle.awaited)
            if not (attrs["State"].get("Running") and awaited["State"].get("Running")):
                raise BackendError(f"run {handle.run_id} is not running")
            refused = None
            if NO_NETWORK in attrs["NetworkSettings"]["Networks"]:
                refused = self._attach_restricted_network(client, handle)
                attrs = client.api.inspect_container(handle.container_id)
        networks: dict[str, dict[str, str]] = attrs["NetworkSettings"]["Networks"]
        on_network = networks.get(handle.network or "") or next(iter(networks.values()), {})
        address = on_network.get("IPAddress")
        if not address:
            why = f": {refused}" if refused else ""
            raise BackendError(f"run {handle.run_id} has no address on its network{why}")
        return f"http://{address}:{port}"

    @staticmethod
    def _attach_restricted_network(
        client: docker.DockerClient, handle: DockerRunHandle
    ) -> PlatformRefusedError | None:
        """Give a network-less (restricted) run its own network, guarded like any restricted one.

        Another `endpoint` call may be doing the same at once, so a step the engine
        refuses (the network exists, the run is already moved) is not an error by
        itself; the caller looks at where the run ended up.

        Returns:
            The last refusal, to explain a run that still has no address.
        """
        network = handle.network
        if not network:
            raise BackendError(f"run {handle.run_id} has no network name: not started by SSEBench")
        ensure_host_guard()
        refused = None
        try:
            _create_network(client, network, {labels.RUN_ID: handle.run_id}, "restricted")
        except PlatformRefusedError as exc:
            refused = exc
        try:
            with engine_errors(f"taking run {handle.run_id} out of the network-less mode"):
                client.api.disconnect_container_from_network(handle.container_id, NO_NETWORK)
        except PlatformRefusedError as exc:
            refused = exc
        try:
            with engine_errors(f"attaching run {handle.run_id} to {network}"):
                client.api.connect_container_to_network(handle.container_id, network)
        except PlatformRefusedError as exc:
            refused = exc
        return refused

    @override
    def exec_argv(
        self,
        handle: DockerRunHandle,
        command: Sequence[str],
        *,
        user: str | None = None,
        workdir: str | None = None,
        tty: bool = False,
        stdin: bool = False,
        env_names: Sequence[str] = (),
        container: ContainerRole = "task",
    ) -> list[str]:
        if container == "agent" and handle.agent_timeout is not None:
            refuse_in_agent_container(user)
        argv = [shutil.which("docker") or "docker", "exec"]
        if stdin:
            argv.append("--interactive")
        if tty:
            argv.append("--tty")
        if user:
            argv += ["--user", user]
        if workdir:
            argv += ["--workdir", workdir]
        for name in env_names:
            if not name or "=" in name:
                raise BackendError(f"invalid environment variable name {name!r}")
            # `--env NAME` without a value: docker reads the value from its own environment.
            argv += ["--env", name]
        target = handle.agent_container if container == "agent" else None
        return [*argv, target or handle.container_id, *command]
