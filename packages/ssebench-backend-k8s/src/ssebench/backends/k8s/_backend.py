"""KubernetesBackend: each run a Job on a cluster, through the official client."""

from __future__ import annotations

import itertools
import re
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

import msgspec
from kubernetes import client
from typing_extensions import override

from ssebench.backends.k8s import _objects as objects
from ssebench.backends.k8s import _rest as rest
from ssebench.backends.k8s._agent_watch import agent_log, tell_checker, watch_agent
from ssebench.backends.k8s._api import api_client, api_errors, gateway_namespace, namespace
from ssebench.backends.k8s._copyout import extract
from ssebench.backends.k8s._exec import run_in
from ssebench.backends.k8s._handle import K8sRunHandle
from ssebench.backends.k8s._lease import Renewer
from ssebench.backends.k8s._sidecar import KILL_TASK_FILE, TASK_CONTAINER, add_pair, is_sidecar
from ssebench.spec import (
    Backend,
    BackendError,
    ContainerRole,
    ImageRequest,
    Images,
    ImageUnavailableError,
    ModelGateway,
    ModelsFile,
    PlatformNotFoundError,
    PlatformRefusedError,
    RunInfo,
    RunSpec,
    RunState,
    RunTimeoutError,
    contract,
    labels,
    refuse_in_agent_container,
)
from ssebench.spec._images import prebuilt_images
from ssebench.spec.lease import renewal
from ssebench.spec.streams import merge_lines

if TYPE_CHECKING:
    from ssebench.backends.k8s._gateway_deploy import GatewayDeployer, K8sGatewayStatus

_POLL: Final = 0.5
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KILLED: Final = 137
RUN: Final = objects.RUN_CONTAINER
_START_TIMEOUT: Final = 600
"""Seconds a run's image may take to be pulled and started."""
_CANNOT_START: Final = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)


def _run_status(pod: Any, container: str = objects.RUN_CONTAINER) -> Any:
    for status in pod.status.container_statuses or []:
        if status.name == container:
            return status
    return None


def _started(pod: Any) -> bool:
    """Whether the run's containers (a sidecar run's two, not the keeper) have started."""
    wanted = {objects.RUN_CONTAINER, TASK_CONTAINER}
    found = [s for s in pod.status.container_statuses or [] if s.name in wanted]
    return bool(found) and all(
        s.state is not None and (s.state.running or s.state.terminated) for s in found
    )


_ROLES: Final = {objects.RUN_CONTAINER: "agent", TASK_CONTAINER: "environment"}
"""The role (`RunHandle.images`) of each container a run is started from."""


def _started_images(pod: Any) -> dict[str, str]:
    """What the kubelet started each run container from, by role: the digest it resolved
    the tag to when it pulled (`imageID`), where the pod's status says."""
    return {
        _ROLES[status.name]: str(status.image_id)
        for status in pod.status.container_statuses or []
        if status.name in _ROLES and status.image_id
    }


def _run_image(pod: Any) -> str:
    """The image of the container the run waits for (a sidecar run's agent container)."""
    return next(str(c.image) for c in pod.spec.containers if c.name == objects.RUN_CONTAINER)


def _state(pod: Any, container: str = objects.RUN_CONTAINER) -> tuple[RunState, int | None]:
    status = _run_status(pod, container)
    if status is None or status.state is None:
        return ("created", None) if pod.status.phase == "Pending" else ("unknown", None)
    if status.state.terminated is not None:
        return "exited", int(status.state.terminated.exit_code)
    if status.state.running is not None:
        return "running", None
    return "created", None


def _warm() -> None:
    """Import the client's generated API classes (see _rest) off the caller's path."""
    for name in ("CoreV1Api", "BatchV1Api", "NetworkingV1Api"):
        getattr(client, name)


class KubernetesBackend(Backend[K8sRunHandle]):
    """Runs each run as a Job of one pod: the image's container and a keeper of its results."""

    name: ClassVar[str] = "k8s"
    builds_images: ClassVar[bool] = False
    supports_exec: ClassVar[bool] = True
    # The keys are the cluster's (`ssebench proxy up --backend k8s` put them there).
    gateway_keys_from_host: ClassVar[bool] = False

    def __init__(self) -> None:
        self._api: client.ApiClient | None = None
        self._lock = threading.Lock()
        self._relays: dict[str, threading.Thread] = {}
        self._renewers: dict[str, Renewer] = {}

    def _core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self._client())

    def _client(self) -> client.ApiClient:
        with self._lock:
            if self._api is None:
                self._api = api_client()
            return self._api

    # ---------------------------------------------------------------- images

    @override
    def prepare_images(self, request: ImageRequest) -> Images:
        if not request.prebuilt:
            raise ImageUnavailableError(
                "the k8s backend runs prebuilt images only: pass --prebuilt "
                "(publish them first with `ssebench images push`)"
            )
        # The cluster pulls the image itself; a missing one fails the run's start.
        return prebuilt_images(request)

    @override
    def copy_from_image(
        self, image: str, path: str, dest: Path, platform: str | None = None
    ) -> None:
        from ssebench.backends.k8s._image_file import copy_from_image

        copy_from_image(self._client(), namespace(), image, path, dest)

    # ---------------------------------------------------------------- a run

    @override
    def start(self, spec: RunSpec) -> K8sRunHandle:
        ns = namespace()
        name = objects.job_name(spec.run_id)
        as_labels, annotations = objects.split_labels(dict(spec.labels))
        leased = labels.LEASE_PID in spec.labels
        if leased:
            annotations = {**annotations, **renewal()}  # renewed while this process lives
        own = {
            **as_labels,
            objects.BACKEND_LABEL: "k8s",
            objects.NAME_LABEL: name,
            objects.KEEP_LABEL: "true" if spec.keep else "false",
        }
        checker = spec.sidecar is not None and spec.sidecar.checker
        if checker:
            own[objects.AGENT_TIMEOUT_LABEL] = str(spec.timeout)
        data, artifacts = objects.secret_data(spec)
        made = objects.job(name, spec, own, annotations, artifacts)
        if spec.sidecar is not None:
            add_pair(made, spec, spec.sidecar)
        api = self._client()
        # Raw requests, not the generated API classes (half a second of imports, see
        # _rest); those are imported meanwhile, for the output's relay.
        warm = threading.Thread(target=_warm, daemon=True)
        warm.start()
        jobs = f"/apis/batch/v1/namespaces/{ns}/jobs"
        created = False
        pod: str | None = None
        try:
            with api_errors(f"starting run {spec.run_id}"):
                job = rest.create(api, jobs, made)
                created = True
                refs = objects.owner(job)
                secret = client.V1Secret(
                    metadata=client.V1ObjectMeta(name=name, labels=own, owner_references=refs),
                    string_data=data,
                    type="Opaque",
                )
                rest.create(api, f"/api/v1/namespaces/{ns}/secrets", secret)
                policy: Any = objects.network_policy(name, own, spec)
                policy.metadata.owner_references = refs
                rest.create(
                    api, f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies", policy
                )
                # The pod exists only now, with its Secret and its policy in place.
                unsuspend = {"spec": {"suspend": False}}
                rest.request(api, "PATCH", f"{jobs}/{name}", body=unsuspend).drain_conn()
                pod = self._wait_for_pod(api, ns, name)
            if spec.network.model_proxy:
                # The run's model key works from its pod's address only, from now on.
                from ssebench.backends.k8s._gateway import bind_run

                bind_run(api, ns, gateway_namespace(), pod, spec.run_id)
            handle = K8sRunHandle(
                run_id=spec.run_id,
                name=name,
                keep=spec.keep,
                namespace=ns,
                pod=pod,
                results_dir=spec.results.source,
                sidecar=spec.sidecar is not None,
                agent_timeout=float(spec.timeout) if checker else None,
            )
            # Its containers exist once the image is pulled: a missing image fails here.
            started = self._until_started(handle)
        except BaseException:
            if created:
                self._remove(ns, name, pod)
                self._until_no_pod(api, ns, name)
            raise
        # The tags were pulled just now: the run's provenance names what they resolved to.
        handle = msgspec.structs.replace(handle, images=_started_images(started))
        relay = threading.Thread(target=self._relay, args=(handle,), daemon=True)
        self._relays[name] = relay
        relay.start()
        if leased:
            renewer = Renewer(self._client(), ns, handle.pod)
            self._renewers[name] = renewer
            renewer.start()
        return handle

    @staticmethod
    def _wait_for_pod(api: client.ApiClient, ns: str, name: str, timeout: float = 60) -> str:
        return rest.wait_for_pod(
            api,
            ns,
            lambda pod: pod.metadata.name if pod is not None else None,
            timeout=timeout,
            what=f"a pod of the Job {name}",
            selector=f"{objects.NAME_LABEL}={name}",
        )

    def _relay(self, handle: K8sRunHandle) -> None:
        """The run container's output to this process's stdout and stderr, as it is written.

        Apart where the cluster serves the two streams apart (PodLogsQuerySplitStreams);
        elsewhere both go to stdout, as the log API interleaves them.
        """
        try:
            out = self._lines(handle, follow=True, stream="Stdout")
        except PlatformRefusedError:
            out, err = self._lines(handle, follow=True, stream=None), None
        else:
            err = self._lines(handle, follow=True, stream="Stderr")
        errs = None
        if err is not None:
            errs = threading.Thread(target=self._copy, args=(handle, err, sys.stderr), daemon=True)
            errs.start()
        self._copy(handle, out, sys.stdout)
        if errs is not None:
            errs.join(timeout=10)  # `wait` joins this thread: stderr's last lines are out too

    @staticmethod
    def _copy(handle: K8sRunHandle, lines: Iterator[str], target: Any) -> None:
        try:
            for line in lines:
                target.write(line + "\n")
                target.flush()
        except BackendError as exc:
            print(f"ssebench: the output of run {handle.run_id} stopped: {exc}", file=sys.stderr)

    def _until_started(self, handle: K8sRunHandle) -> Any:
        def started(pod: Any) -> Any:
            if pod is None:
                raise PlatformNotFoundError(f"run {handle.run_id} has no pod any more")
            if _started(pod):
                return pod
            statuses = [
                *(pod.status.init_container_statuses or []),
                *(pod.status.container_statuses or []),
            ]
            for status in statuses:
                waiting = status.state.waiting if status is not None and status.state else None
                if waiting is not None and waiting.reason in _CANNOT_START:
                    raise BackendError(f"run {handle.run_id} cannot start: {waiting.reason}")
            return pod if pod.status.phase in ("Failed", "Succeeded") else None

        # Watched, not polled: the run's output is relayed from the moment it starts.
        with api_errors(f"watching run {handle.run_id}"):
            return rest.wait_for_pod(
                self._client(),
                handle.namespace,
                started,
                timeout=_START_TIMEOUT,
                what=f"the start of run {handle.run_id}",
                name=handle.pod,
            )

    @override
    def wait(self, handle: K8sRunHandle, timeout: float | None = None) -> int:
        core = self._core()
        deadline = None if timeout is None else time.monotonic() + timeout
        marker = f"{objects.KEEP_ROOT}/results/{contract.GRADED_MARKER}"
        if handle.agent_timeout is not None:
            status = watch_agent(self._client(), core, handle, deadline)
            if status is not None:
                tell_checker(core, handle, status)
        while True:
            try:
                with api_errors(f"watching run {handle.run_id}"):
                    pod: Any = core.read_namespaced_pod(handle.pod, handle.namespace)
            except PlatformNotFoundError:
                return _KILLED
            state, code = _state(pod, handle.awaited)
            if state == "exited":
                self._join_relay(handle)
                return code if code is not None else 1
            if pod.status.phase == "Failed":
                return _KILLED
            if handle.keep and state == "running":
                found, _ = run_in(
                    core,
                    handle.namespace,
                    handle.pod,
                    objects.KEEPER_CONTAINER,
                    ["test", "-e", marker],
                )
                if found == 0:
                    return 0
            if deadline is not None and time.monotonic() > deadline:
                raise RunTimeoutError(f"run {handle.run_id} did not finish in {timeout}s")
            time.sleep(_POLL)

    def _join_relay(self, handle: K8sRunHandle) -> None:
        relay = self._relays.pop(handle.name, None)
        if relay is not None:
            relay.join(timeout=10)

    @override
    def logs(self, handle: K8sRunHandle, follow: bool = False) -> Iterator[str]:
        """The run's output: a checker's pod shows the agent container's, then the
        checker's (both as they come when following)."""
        agent = self._lines(handle, follow=follow, stream=None)
        if handle.agent_timeout is None:
            return agent
        checker = self._lines(handle, follow=follow, stream=None, container=TASK_CONTAINER)
        if follow:
            return merge_lines([agent, checker])
        return itertools.chain(agent, checker)

    def _lines(
        self,
        handle: K8sRunHandle,
        *,
        follow: bool,
        stream: str | None,
        container: str = objects.RUN_CONTAINER,
    ) -> Iterator[str]:
        """The output's lines (without their newline); the request is made now (a refusal
        raises here, not at the first line)."""
        if follow:
            self._until_started(handle)
        query = {"container": container, "follow": str(follow).lower()}
        if stream:
            query["stream"] = stream
        path = f"/api/v1/namespaces/{handle.namespace}/pods/{handle.pod}/log"
        with api_errors(f"reading the output of run {handle.run_id}"):
            response: Any = rest.request(self._client(), "GET", path, query)
        return self._split(handle, response)

    @staticmethod
    def _split(handle: K8sRunHandle, response: Any) -> Iterator[str]:
        with api_errors(f"reading the output of run {handle.run_id}"):
            try:
                pending = b""
                for chunk in response.stream(64 * 1024):
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        yield line.decode("utf-8", errors="replace")
                if pending:
                    yield pending.decode("utf-8", errors="replace")
            finally:
                response.release_conn()

    @override
    def collect_results(self, handle: K8sRunHandle, dest: Path) -> None:
        core = self._core()
        code, stream = run_in(
            core,
            handle.namespace,
            handle.pod,
            objects.KEEPER_CONTAINER,
            [handle.helper_tool("tar"), "-C", objects.KEEP_ROOT, "-cf", "-", "results", "archive"],
            timeout=600,
        )
        with stream:
            if code != 0:
                raise BackendError(
                    f"reading the results of run {handle.run_id} failed (tar {code})"
                )
            try:
                report = extract(stream, {"results": dest, "archive": dest / "archive"})
            except (tarfile.TarError, OSError) as exc:
                raise BackendError(f"copying the results of run {handle.run_id}: {exc}") from exc
        if report:
            print(f"ssebench: results of run {handle.run_id}: {report}", file=sys.stderr)
        if handle.agent_timeout is not None:
            # The agent container's output, capped here: its launcher is the agent's.
            try:
                (dest / "agent.log").write_bytes(agent_log(self._client(), handle))
            except (BackendError, OSError) as exc:
                print(f"ssebench: agent.log of run {handle.run_id}: {exc}", file=sys.stderr)

    @override
    def stop(self, handle: K8sRunHandle, grace: float = contract.STOP_GRACE) -> None:
        """SIGTERM to the entrypoint by exec; past `grace`, the kill file ends the container.

        A sidecar run's agent container first (while it ends, grading what is there, it
        still needs the daemon), then its task container, each within `grace`. Nothing
        runs in the agent container of a checker's pod, whose image is the agent's: its
        kill file at once, which the checker's alive port answers with 503, and the
        kubelet's liveness probe ends it (SIGTERM, then the pod's grace).
        """
        ended = [(objects.RUN_CONTAINER, objects.KILL_FILE)]
        if handle.sidecar:
            ended.append((TASK_CONTAINER, KILL_TASK_FILE))
        for container, kill_file in ended:
            by_exec = container != objects.RUN_CONTAINER or handle.agent_timeout is None
            if not self._stop_container(handle, container, kill_file, grace, by_exec=by_exec):
                return

    def _stop_container(
        self, handle: K8sRunHandle, container: str, kill_file: str, grace: float, *, by_exec: bool
    ) -> bool:
        """End one container of the run's pod; False when the pod is gone or ended with it.

        Without `by_exec`, no SIGTERM by exec: the kill file as soon as the container runs.
        """
        core = self._core()
        deadline = time.monotonic() + grace
        signalled = False
        while True:
            try:
                with api_errors(f"stopping run {handle.run_id}"):
                    pod: Any = core.read_namespaced_pod(handle.pod, handle.namespace)
            except PlatformNotFoundError:
                return False
            if pod.status.phase in ("Failed", "Succeeded"):
                return False
            state, _ = _state(pod, container)
            if state == "exited":
                return True
            if state == "running" and not by_exec:
                break
            if state == "running" and not signalled:
                try:
                    run_in(
                        core,
                        handle.namespace,
                        handle.pod,
                        container,
                        [handle.helper_tool("bash"), "-c", "kill -TERM 1"],
                        timeout=10,
                    )
                    signalled = True
                except BackendError:
                    pass
            if time.monotonic() >= deadline:
                break
            time.sleep(_POLL)
        if state == "running":
            run_in(
                core,
                handle.namespace,
                handle.pod,
                objects.KEEPER_CONTAINER,
                [handle.helper_tool("touch"), f"{objects.KEEP_ROOT}/control/{kill_file}"],
                timeout=10,
            )
            end = time.monotonic() + objects.PROBE_PERIOD * (objects.PROBE_FAILURES + 2) + 10
            while time.monotonic() < end:
                with api_errors(f"stopping run {handle.run_id}"):
                    pod = core.read_namespaced_pod(handle.pod, handle.namespace)
                if _state(pod, container)[0] == "exited":
                    return True
                time.sleep(_POLL)
            return True
        # Never started (an image still being pulled): nothing was written; end the pod.
        self._delete_pod(handle.namespace, handle.pod)
        return False

    def _until_no_pod(self, api: client.ApiClient, ns: str, name: str) -> None:
        """After a failed start, until no pod of the Job is left (30 s at most): a start that
        raises leaves nothing. A pod the Job's controller made before it saw the Job go is
        deleted too."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with api_errors(f"removing run {name}"):
                    pods, _ = rest.list_pods(api, ns, f"{objects.NAME_LABEL}={name}")
                left = [pod for pod in pods if pod.metadata.deletion_timestamp is None]
                if not left:
                    return
                for pod in left:
                    self._delete_pod(ns, pod.metadata.name)
            except BackendError:
                return  # the start's own error is the one to report
            time.sleep(_POLL)

    def _delete_pod(self, ns: str, pod: str) -> None:
        try:
            with api_errors(f"removing pod {pod}"):
                self._core().delete_namespaced_pod(pod, ns, grace_period_seconds=0)
        except PlatformNotFoundError:
            pass

    @override
    def cleanup(self, handle: K8sRunHandle) -> None:
        self._stop_renewing(handle.name)
        if handle.keep:
            return
        self._remove(handle.namespace, handle.name, handle.pod)

    @override
    def remove(self, handle: K8sRunHandle) -> None:
        self._remove(handle.namespace, handle.name, handle.pod)

    def _stop_renewing(self, name: str) -> None:
        renewer = self._renewers.pop(name, None)
        if renewer is not None:
            renewer.stop()

    def _remove(self, ns: str, name: str, pod: str | None) -> None:
        self._stop_renewing(name)
        api = self._client()
        deletions: list[tuple[str, Any]] = [
            (
                "Job",
                lambda: client.BatchV1Api(api).delete_namespaced_job(
                    name, ns, propagation_policy="Background", grace_period_seconds=0
                ),
            ),
            ("Secret", lambda: client.CoreV1Api(api).delete_namespaced_secret(name, ns)),
            (
                "NetworkPolicy",
                lambda: client.NetworkingV1Api(api).delete_namespaced_network_policy(name, ns),
            ),
        ]
        if pod is not None:
            deletions.append(("pod", lambda: self._delete_pod(ns, pod)))
        for kind, delete in deletions:
            try:
                with api_errors(f"removing {kind} {name}"):
                    delete()
            except PlatformNotFoundError:
                pass
        self._relays.pop(name, None)
        if pod is not None:
            from ssebench.backends.k8s._forward import stop_forwards

            stop_forwards(ns, pod)

    @override
    def endpoint(self, handle: K8sRunHandle, port: int, container: ContainerRole = "task") -> str:
        # A pod's containers share its network namespace: one forward reaches them all.
        from ssebench.backends.k8s._forward import forward_url

        with api_errors(f"finding run {handle.run_id}"):
            pod: Any = self._core().read_namespaced_pod(handle.pod, handle.namespace)
        if _state(pod, handle.awaited)[0] != "running":
            raise BackendError(f"run {handle.run_id} is not running")
        return forward_url(handle.namespace, handle.pod, port)

    @override
    def exec_argv(
        self,
        handle: K8sRunHandle,
        command: Sequence[str],
        *,
        user: str | None = None,
        workdir: str | None = None,
        tty: bool = False,
        stdin: bool = False,
        env_names: Sequence[str] = (),
        container: ContainerRole = "task",
    ) -> list[str]:
        """Our own exec client over the API (`_exec_cli`): values reach it by name only."""
        from ssebench.backends.k8s._exec_cli import argv

        for name in env_names:
            if not _ENV_NAME.fullmatch(name):
                raise BackendError(f"invalid environment variable name {name!r}")
        if container == "agent" and handle.agent_timeout is not None:
            refuse_in_agent_container(user)
        chosen = TASK_CONTAINER if handle.sidecar and container == "task" else None
        return argv(
            handle.namespace,
            handle.pod,
            chosen or objects.RUN_CONTAINER,
            command,
            user=user,
            workdir=workdir,
            tty=tty,
            stdin=stdin,
            env_names=env_names,
        )

    # ---------------------------------------------------------------- the model gateway

    @override
    def gateway(self, models: ModelsFile) -> ModelGateway:
        """The gateway `ssebench proxy up --backend k8s` deployed in its own namespace.

        It is never started here: deploying it takes the cluster's admin rights,
        which the backend's Role does not have.
        """
        from ssebench.backends.k8s._gateway import K8sGateway

        return K8sGateway.find(
            self._client(), namespace(), gateway_namespace(), reservation=models.reservation
        )

    def _deployer(self) -> GatewayDeployer:
        from ssebench.backends.k8s._gateway_deploy import GatewayDeployer

        return GatewayDeployer(self._client(), namespace(), gateway_namespace())

    def gateway_up(
        self, config: dict[str, Any], image: str, say: Callable[[str], None]
    ) -> K8sGatewayStatus:
        """Deploy the gateway (LiteLLM's `config`, the pushed `image`); see `_gateway_deploy`."""
        return self._deployer().up(config, image, say)

    def gateway_down(self) -> bool:
        """Remove the gateway; True if it was deployed."""
        return self._deployer().down()

    def gateway_status(self) -> K8sGatewayStatus:
        """The gateway's state, address and models."""
        return self._deployer().status()

    # ---------------------------------------------------------------- finding runs

    @override
    def list_runs(self, labels: dict[str, str] | None = None) -> list[RunInfo]:
        wanted = dict(labels or {})
        as_labels, as_annotations = objects.split_labels(wanted)
        selector = ",".join(
            f"{k}={v}" for k, v in {**as_labels, objects.BACKEND_LABEL: "k8s"}.items()
        )
        with api_errors("listing runs"):
            # One request, decoded without the client's models (see _rest).
            pods, _ = rest.list_pods(self._client(), namespace(), selector)
        runs = []
        for pod in pods:
            meta = pod.metadata
            if meta.deletion_timestamp is not None:
                continue  # being removed: its Job is gone already
            tags = {**(meta.annotations or {}), **(meta.labels or {})}
            if any(tags.get(k) != v for k, v in as_annotations.items()):
                continue
            runs.append(_run_info(pod, tags))
        return sorted(runs, key=lambda run: run.created_at or "", reverse=True)


def _run_info(pod: Any, tags: dict[str, str]) -> RunInfo:
    agent_timeout = _seconds(tags.get(objects.AGENT_TIMEOUT_LABEL))
    state, code = _state(pod, TASK_CONTAINER if agent_timeout is not None else RUN)
    meta = pod.metadata
    shown = {k: v for k, v in tags.items() if k.startswith(labels.PREFIX)}
    created = meta.creation_timestamp
    name = tags.get(objects.NAME_LABEL, meta.name)
    run_id = tags.get(labels.RUN_ID, "")
    return RunInfo(
        run_id=run_id,
        name=name,
        state=state,
        image=_run_image(pod),
        exit_code=code,
        labels=shown,
        created_at=(
            created.isoformat().replace("+00:00", "Z") if isinstance(created, datetime) else None
        ),
        handle=K8sRunHandle(
            run_id=run_id,
            name=name,
            keep=tags.get(objects.KEEP_LABEL) == "true",
            namespace=meta.namespace,
            pod=meta.name,
            results_dir=tags.get(labels.RESULTS),
            sidecar=is_sidecar(pod),
            agent_timeout=agent_timeout,
        ),
    )


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
