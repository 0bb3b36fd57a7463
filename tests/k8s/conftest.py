"""Fixtures of the k8s tier: a client of the test cluster, a namespace per test, a test image.

The cluster is the one `tests/k8s/cluster/cluster.sh up` starts (or any cluster
whose kubeconfig `SSEBENCH_KUBECONFIG` names); scripts/test.sh starts it in the
background and the tier waits for that start. When none answers, the tests skip,
or fail under CI=true.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import docker
import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream
from kubernetes.stream.ws_client import STDERR_CHANNEL, STDOUT_CHANNEL

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_SH = Path(__file__).parent / "cluster" / "cluster.sh"
BUSYBOX = Path("/bin/busybox")


def missing(config: pytest.Config, reason: str) -> None:
    """The root conftest's `missing`: skip, or fail under CI=true."""
    path = ROOT / "conftest.py"
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, ModuleType) and plugin.__file__ and Path(plugin.__file__) == path:
            plugin.missing(reason)
    raise RuntimeError(f"{path} is not loaded")


def _kubeconfig_path() -> Path:
    env = os.environ.get("SSEBENCH_KUBECONFIG")
    if env:
        return Path(env)
    out = subprocess.run(
        [str(CLUSTER_SH), "kubeconfig"], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())


START_WAIT = 45 * 60.0
"""How long the tier waits for a cluster start under way (a cold build included)."""


def _start_under_way(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # ended, not yet waited for by scripts/test.sh


def wait_for_cluster_start(pytestconfig: pytest.Config) -> None:
    """Wait for the `cluster.sh up` that scripts/test.sh started in the background.

    It is started before ruff, mypy and the other tiers so that a cold build
    overlaps them; its PID and log are in SSEBENCH_K8S_UP_PID and SSEBENCH_K8S_UP_LOG.
    """
    pid, log = os.environ.get("SSEBENCH_K8S_UP_PID"), os.environ.get("SSEBENCH_K8S_UP_LOG")
    if not pid:
        return
    deadline = time.monotonic() + START_WAIT
    while _start_under_way(int(pid)):
        if time.monotonic() > deadline:
            missing(pytestconfig, f"the test cluster was not up after {START_WAIT:.0f} s ({log})")
        time.sleep(1)
    if log and "cluster is up" not in Path(log).read_text(errors="replace"):
        tail = Path(log).read_text(errors="replace").splitlines()[-15:]
        missing(pytestconfig, "the test cluster did not start; its log ends:\n" + "\n".join(tail))


@pytest.fixture(scope="session")
def kube(pytestconfig: pytest.Config) -> Iterator[client.ApiClient]:
    """A client of the test cluster, whose node is Ready."""
    wait_for_cluster_start(pytestconfig)
    path = _kubeconfig_path()
    if not path.is_file():
        missing(
            pytestconfig,
            f"no Kubernetes cluster: {path} does not exist (run tests/k8s/cluster/cluster.sh up)",
        )
    api = config.new_client_from_config(config_file=str(path))
    try:
        nodes = client.CoreV1Api(api).list_node(_request_timeout=5).items
    except Exception as exc:
        missing(pytestconfig, f"no Kubernetes cluster answers at {api.configuration.host}: {exc}")
    ready = [
        n.metadata.name
        for n in nodes
        if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    ]
    if not ready:
        missing(pytestconfig, f"the cluster at {api.configuration.host} has no Ready node")
    yield api
    api.close()


@pytest.fixture(scope="session")
def core(kube: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube)


@pytest.fixture(scope="session")
def batch(kube: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(kube)


@pytest.fixture(scope="session")
def networking(kube: client.ApiClient) -> client.NetworkingV1Api:
    return client.NetworkingV1Api(kube)


@pytest.fixture
def namespace(core: client.CoreV1Api) -> Iterator[str]:
    """A fresh namespace whose default service account exists; deleted afterwards."""
    name = "t-" + secrets.token_hex(4)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    deadline = time.monotonic() + 60
    while True:
        try:
            core.read_namespaced_service_account("default", name)
            break
        except ApiException as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    yield name
    core.delete_namespace(name, grace_period_seconds=0, propagation_policy="Background")


TEST_IMAGE_DOCKERFILE = """\
ARG BASE
FROM ${BASE}
COPY busybox /usr/local/bin/busybox
RUN for a in ip nc wget httpd; do ln -s busybox /usr/local/bin/$a; done \\
 && mkdir -p /srv/www /data/tree/sub \\
 && echo "hello from the pod" > /srv/www/index.html \\
 && echo "{marker}" > /etc/ssebench-k8s-marker
CMD ["cat", "/etc/ssebench-k8s-marker"]
"""


@dataclass(frozen=True)
class BuiltImage:
    ref: str  # what a pod spec names
    marker: str  # a line baked into the image at build time


@pytest.fixture(scope="session")
def test_image(
    kube: client.ApiClient, tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> BuiltImage:
    """A locally built image FROM the base image (with a static busybox), on the node."""
    from ssebench.spec import base_image

    if not BUSYBOX.is_file():
        missing(
            pytestconfig, f"{BUSYBOX} is missing (Debian busybox-static; cluster.sh up installs it)"
        )
    try:
        docker_client = docker.from_env()
        docker_client.ping()
    except docker.errors.DockerException as exc:
        missing(pytestconfig, f"no Docker engine to build the test image: {exc}")
    base = base_image()
    marker = "built-locally-" + secrets.token_hex(6)
    context = tmp_path_factory.mktemp("k8s-image")
    shutil.copy2(BUSYBOX, context / "busybox")
    (context / "Dockerfile").write_text(TEST_IMAGE_DOCKERFILE.replace("{marker}", marker))
    tag = "ssebench-test/k8s:" + hashlib.sha256(marker.encode()).hexdigest()[:12]
    docker_client.images.build(
        path=str(context), tag=tag, buildargs={"BASE": base}, rm=True, pull=False
    )
    try:
        out = subprocess.run(
            [str(CLUSTER_SH), "load-image", tag], capture_output=True, text=True, check=True
        )
    finally:
        docker_client.images.remove(tag, noprune=False)
        docker_client.close()
    return BuiltImage(ref=out.stdout.strip().splitlines()[-1], marker=marker)


# ---------------------------------------------------------------- pods


def wait_for_phase(
    core: client.CoreV1Api, namespace: str, name: str, phases: set[str], timeout: float = 120
) -> client.V1Pod:
    deadline = time.monotonic() + timeout
    while True:
        pod = core.read_namespaced_pod(name, namespace)
        if pod.status.phase in phases:
            return pod
        if time.monotonic() > deadline:
            raise AssertionError(f"pod {name} is {pod.status.phase}, not {phases}: {pod.status}")
        time.sleep(0.3)


RunPod = Callable[..., str]


@pytest.fixture
def run_pod(core: client.CoreV1Api, namespace: str, test_image: BuiltImage) -> RunPod:
    """Create a pod of the test image (`sleep infinity` unless told) and wait until it runs."""

    def run(
        name: str = "probe",
        *,
        containers: list[client.V1Container] | None = None,
        volumes: list[client.V1Volume] | None = None,
        wait: bool = True,
    ) -> str:
        if containers is None:
            containers = [
                client.V1Container(name="main", image=test_image.ref, command=["sleep", "infinity"])
            ]
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels={"app": name}),
            spec=client.V1PodSpec(
                containers=containers,
                volumes=volumes,
                restart_policy="Never",
                termination_grace_period_seconds=0,
                automount_service_account_token=False,
            ),
        )
        core.create_namespaced_pod(namespace, pod)
        if wait:
            wait_for_phase(core, namespace, name, {"Running"})
        return name

    return run


@dataclass
class ExecResult:
    code: int
    stdout: bytes
    stderr: bytes


Exec = Callable[..., ExecResult]


@pytest.fixture
def pod_exec(core: client.CoreV1Api, namespace: str) -> Exec:
    """Run a command in a pod through the API (exec over WebSocket); bytes back."""

    def run(
        pod: str, command: list[str], container: str | None = None, timeout: float = 60
    ) -> ExecResult:
        kwargs: dict[str, Any] = {"container": container} if container else {}
        ws = stream(
            core.connect_get_namespaced_pod_exec,
            pod,
            namespace,
            command=command,
            stdin=False,
            stdout=True,
            stderr=True,
            tty=False,
            binary=True,
            _preload_content=False,
            **kwargs,
        )
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        while ws.is_open():
            if time.monotonic() > deadline:
                ws.close()
                raise AssertionError(f"exec {command} did not finish in {timeout}s")
            ws.update(timeout=1)
            out += ws.read_channel(STDOUT_CHANNEL, timeout=0) or b""
            err += ws.read_channel(STDERR_CHANNEL, timeout=0) or b""
        out += ws.read_channel(STDOUT_CHANNEL, timeout=0) or b""
        err += ws.read_channel(STDERR_CHANNEL, timeout=0) or b""
        code = ws.returncode
        ws.close()
        return ExecResult(code=code, stdout=bytes(out), stderr=bytes(err))

    return run
