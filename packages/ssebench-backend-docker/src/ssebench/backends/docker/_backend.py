"""DockerBackend: runs on the local Docker engine through the docker SDK."""

from __future__ import annotations

import io
import secrets
import shutil
import tarfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar, Final

from typing_extensions import override

import docker
import docker.models.networks
import docker.types
from ssebench.backends.docker._atomic import write_atomically
from ssebench.backends.docker._egress import bridge_name, ensure_host_guard
from ssebench.backends.docker._engine import docker_client
from ssebench.backends.docker._errors import CopyFromImageError, engine_errors
from ssebench.backends.docker._handle import DockerRunHandle
from ssebench.backends.docker._image_files import ImageFileCache
from ssebench.backends.docker._runs import (
    KEEP_LABEL,
    NETWORK_LABEL,
    label_filters,
    run_info,
)
from ssebench.backends.docker._streams import join_relay, split_lines, start_relay
from ssebench.spec import (
    Backend,
    BackendError,
    Egress,
    ImageRequest,
    Images,
    Mount,
    PlatformNotFoundError,
    PlatformRefusedError,
    PlatformTimeoutError,
    RunInfo,
    RunSpec,
    RunTimeoutError,
    contract,
    labels,
)

_POLL_SECONDS: Final = 0.2


NO_NETWORK: Final = "none"
"""The engine's name for a container's network mode without any network."""

LOG_CONFIG: Final = {"max-size": "32m", "max-file": "4"}
"""The engine's log of a run (json-file, which `runs logs` reads back, rotated files
included) is kept to 4 files of 32 MiB: a second bound, after the entrypoint's cap
(`contract.AGENT_OUTPUT_LIMIT`), on what the agent's output costs the host's disk
(DESIGN.md §4, "What reaches the host is tamed": output capped)."""


def _create_network(
    client: docker.DockerClient, name: str, run_id: str, egress: Egress
) -> docker.models.networks.Network:
    """A run's own network: internal (and guarded by the host rule) when restricted."""
    with engine_errors(f"creating network {name}"):
        return client.networks.create(
            name,
            driver="bridge",
            internal=egress == "restricted",
            labels={labels.RUN_ID: run_id, NETWORK_LABEL: name},
            options={"com.docker.network.bridge.name": bridge_name(egress)},
        )


def _mounts(spec: RunSpec) -> list[docker.types.Mount]:
    def one(mount: Mount) -> docker.types.Mount:
        return docker.types.Mount(
            target=mount.target, source=mount.source, type=mount.kind, read_only=mount.read_only
        )

    return [one(spec.results), one(spec.archive), *(one(artifact) for artifact in spec.artifacts)]


class DockerBackend(Backend[DockerRunHandle]):
    """Runs each run as one container on its own network of the local Docker engine."""

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
        if spec.mode != "sandbox":
            raise BackendError("the docker backend runs sandbox mode only for now")
        client = self._client()
        hidden = list(spec.env.values())
        suffix = secrets.token_hex(3)
        network_name = f"ssebench-{spec.run_id}-{suffix}"
        container_name = f"ssebench-{spec.run_id}-{suffix}"
        # A restricted run starts with no network at all: with only a loopback
        # interface it reaches nothing, and it costs no bridge, no firewall rules and
        # no DNS set-up. Its own network is made when something must reach it
        # (`endpoint`); under the label it would have, so cleanup finds it.
        restricted = spec.network.egress == "restricted"
        own_labels = {labels.RUN_ID: spec.run_id, NETWORK_LABEL: network_name}
        network = None
        container_id = None
        try:
            # An image the engine cannot find is the run failing to start (BackendError).
            with engine_errors(f"starting run {spec.run_id}", hidden, family=BackendError):
                if not restricted:
                    network = _create_network(client, network_name, spec.run_id, "open")
                container_id = client.api.create_container(
                    spec.image,
                    name=container_name,
                    environment=dict(spec.env),
                    labels={
                        **spec.labels,
                        **own_labels,
                        KEEP_LABEL: "true" if spec.keep else "false",
                    },
                    host_config=client.api.create_host_config(
                        mounts=_mounts(spec),
                        network_mode=NO_NETWORK if restricted else network_name,
                        security_opt=["no-new-privileges"],
                        log_config=docker.types.LogConfig(
                            type=docker.types.LogConfig.types.JSON, config=dict(LOG_CONFIG)
                        ),
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

    @override
    def wait(self, handle: DockerRunHandle, timeout: float | None = None) -> int:
        client = self._client()
        if handle.keep:
            return self._wait_for_grade(client, handle, timeout)
        try:
            with engine_errors(f"waiting for run {handle.run_id}"):
                status = client.api.wait(
                    handle.container_id, timeout=None if timeout is None else max(1, round(timeout))
                )
        except PlatformTimeoutError as exc:
            # The engine holds the answer until the container exits: no answer is the run's time.
            raise RunTimeoutError(f"run {handle.run_id} did not finish in {timeout}s") from exc
        join_relay(handle.container_id)
        return int(status["StatusCode"])

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
                state = client.api.inspect_container(handle.container_id)["State"]
            if not state.get("Running") and state.get("Status") != "created":
                join_relay(handle.container_id)
                return int(state.get("ExitCode", 0))
            if deadline is not None and time.monotonic() > deadline:
                raise RunTimeoutError(f"run {handle.run_id} was not graded in {timeout}s")
            time.sleep(_POLL_SECONDS)

    @override
    def logs(self, handle: DockerRunHandle, follow: bool = False) -> Iterator[str]:
        client = self._client()
        with engine_errors(f"reading the output of run {handle.run_id}"):
            chunks = client.api.logs(
                handle.container_id, stdout=True, stderr=True, stream=True, follow=follow
            )
            yield from split_lines(chunks)

    @override
    def collect_results(self, handle: DockerRunHandle, dest: Path) -> None:
        # The run directory is bind-mounted: what the container wrote is already in dest.
        return None

    @override
    def stop(self, handle: DockerRunHandle, grace: float = contract.STOP_GRACE) -> None:
        client = self._client()
        try:
            with engine_errors(f"stopping run {handle.run_id}"):
                client.api.stop(handle.container_id, timeout=max(0, round(grace)))
        except PlatformNotFoundError:
            return

    @override
    def cleanup(self, handle: DockerRunHandle) -> None:
        if handle.keep:
            return
        self._remove(self._client(), handle.container_id, handle.network)

    def remove(self, handle: DockerRunHandle) -> None:
        """Remove everything of a run, kept or not, running or not."""
        self._remove(self._client(), handle.container_id, handle.network)

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
            try:
                with engine_errors(f"removing network {network}"):
                    client.api.remove_network(network)
            except PlatformNotFoundError:
                pass

    @override
    def list_runs(self, labels: dict[str, str] | None = None) -> list[RunInfo]:
        client = self._client()
        with engine_errors("listing runs"):
            found = client.api.containers(all=True, filters=label_filters(labels))
        runs = [run_info(summary) for summary in found]
        return sorted(runs, key=lambda run: run.created_at or "", reverse=True)

    @override
    def endpoint(self, handle: DockerRunHandle, port: int) -> str:
        client = self._client()
        with engine_errors(f"finding run {handle.run_id}"):
            attrs = client.api.inspect_container(handle.container_id)
            if not attrs["State"].get("Running"):
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
            _create_network(client, network, handle.run_id, "restricted")
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
    ) -> list[str]:
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
        return [*argv, handle.container_id, *command]
