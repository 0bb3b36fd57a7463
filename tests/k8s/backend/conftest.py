"""Fixtures of the k8s backend's tests: a namespace, a ServiceAccount bound to the
backend's Role (the tests drive the backend with its token, not as cluster admin),
and the demo task's prebuilt images pushed once to the cluster's registry.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / "packages/ssebench-backend-k8s/src/ssebench/backends/k8s/role.yaml"
GATEWAY_ROLE = ROLE.with_name("gateway-role.yaml")
REGISTRY = os.environ.get("SSEBENCH_K8S_TEST_REGISTRY", "127.0.0.1:5123/ssebench-k8s-test")
"""The cluster's registry (tests/k8s/cluster), under a prefix of the tests' own (one per
checkout when several test the same cluster at once)."""


@pytest.fixture(scope="session")
def backend_namespace(core: client.CoreV1Api) -> Iterator[str]:
    """A namespace for the session's runs; deleted at the end."""
    name = "ssebench-t-" + secrets.token_hex(3)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name, grace_period_seconds=0, propagation_policy="Background")


@pytest.fixture(scope="session")
def gateway_namespace(core: client.CoreV1Api, backend_namespace: str) -> Iterator[str]:
    """The namespace of the session's model gateway (`proxy up` finds it made); deleted
    at the end."""
    name = backend_namespace + "-gw"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name, grace_period_seconds=0, propagation_policy="Background")


@pytest.fixture(scope="session")
def role_kubeconfig(
    kube: client.ApiClient,
    core: client.CoreV1Api,
    backend_namespace: str,
    gateway_namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """A kubeconfig of a ServiceAccount bound to the package's Roles: role.yaml's in the
    runs' namespace, gateway-role.yaml's in the gateway's, as the README says."""
    ns = backend_namespace
    rbac = client.RbacAuthorizationV1Api(kube)
    core.create_namespaced_service_account(
        ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="ssebench"))
    )
    for where, path in ((ns, ROLE), (gateway_namespace, GATEWAY_ROLE)):
        role = yaml.safe_load(path.read_text())
        rbac.create_namespaced_role(where, role)
        rbac.create_namespaced_role_binding(
            where,
            client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name="ssebench"),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io",
                    kind="Role",
                    name=role["metadata"]["name"],
                ),
                subjects=[
                    client.RbacV1Subject(kind="ServiceAccount", name="ssebench", namespace=ns)
                ],
            ),
        )
    deadline = time.monotonic() + 30
    while True:
        try:
            token = core.create_namespaced_service_account_token(
                "ssebench",
                ns,
                client.AuthenticationV1TokenRequest(
                    spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=7200)
                ),
            ).status.token
            break
        except ApiException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    conf = kube.configuration
    ca = Path(conf.ssl_ca_cert).read_bytes()
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": conf.host,
                            "certificate-authority-data": base64.b64encode(ca).decode(),
                        },
                    }
                ],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [
                    {"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": ns}}
                ],
                "current-context": "sa",
            }
        )
    )
    path.chmod(0o600)
    return path


@pytest.fixture
def k8s_env(
    role_kubeconfig: Path,
    backend_namespace: str,
    gateway_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """The environment the backend runs in: the ServiceAccount's kubeconfig and namespaces."""
    env = {
        "KUBECONFIG": str(role_kubeconfig),
        "SSEBENCH_K8S_NAMESPACE": backend_namespace,
        "SSEBENCH_K8S_GATEWAY_NAMESPACE": gateway_namespace,
        "SSEBENCH_REGISTRY": REGISTRY,
        "SSEBENCH_BACKEND": "k8s",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture(scope="session")
def pushed_images(kube: client.ApiClient) -> str:
    """The demo tasks' reference, dummy, sleeper, memhog and forkbomb images in the registry
    (once)."""
    env = {
        **os.environ,
        "SSEBENCH_REGISTRY": REGISTRY,
        "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents"),
    }
    # --force: the cluster's registry outlives the cluster (cluster.sh keeps it), so it
    # may hold these tags from an earlier checkout; this session tests what it built.
    subprocess.run(
        [
            str(ROOT / ".venv/bin/ssebench"),
            *("images", "push", "--agents", "reference,dummy,sleeper,memhog,forkbomb", "--force"),
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return REGISTRY


SCRIPT_DOCKERFILE = """\
ARG BASE
FROM ${BASE}
COPY busybox /usr/local/bin/busybox
COPY script.sh /script.sh
CMD ["/usr/local/bin/busybox", "sh", "/script.sh"]
"""

STUBBORN_SH = """\
# Writes results and a log, then ignores SIGTERM: only a kill ends it.
trap '' TERM
echo '{"written": "before the stop"}' > "$SSE_RESULTS/result.json"
echo "a log line" > "$SSE_RESULTS/agent.log"
echo "from the agent" > "$SSE_ARCHIVE/dialog.jsonl"
/usr/local/bin/busybox ln -s /etc/shadow "$SSE_ARCHIVE/link-out"
/usr/local/bin/busybox mkfifo "$SSE_ARCHIVE/fifo"
echo suid > "$SSE_ARCHIVE/suid" && /usr/local/bin/busybox chmod 4777 "$SSE_ARCHIVE/suid"
echo "stubborn: written"
while :; do /usr/local/bin/busybox sleep 1; done
"""

NETPROBE_SH = """\
# serve: answer HTTP on 4263 (a run's daemon); connect: try each host:port of TARGETS.
bb=/usr/local/bin/busybox
if [ "$MODE" = serve ]; then
    $bb mkdir -p /tmp/www && echo hello > /tmp/www/index.html
    echo "netprobe: serving"
    exec $bb httpd -f -p 4263 -h /tmp/www
fi
for target in $TARGETS; do
    if echo | $bb nc -w 3 "${target%:*}" "${target##*:}" >/dev/null 2>&1; then
        echo "netprobe: reach $target"
    else
        echo "netprobe: noreach $target"
    fi
done
"""


def _script_image(tmp_path_factory: pytest.TempPathFactory, name: str, script: str) -> str:
    """An image FROM the base image that runs `script` under busybox sh; on the node."""
    import shutil

    import docker

    from ssebench.spec import base_image

    context = tmp_path_factory.mktemp(name)
    shutil.copy2("/bin/busybox", context / "busybox")
    (context / "Dockerfile").write_text(SCRIPT_DOCKERFILE)
    (context / "script.sh").write_text(script)
    tag = f"ssebench-test/k8s-{name}:" + secrets.token_hex(4)
    engine = docker.from_env()
    engine.images.build(
        path=str(context),
        tag=tag,
        buildargs={"BASE": base_image()},
        rm=True,
        forcerm=True,
        pull=False,
    )
    try:
        out = subprocess.run(
            [str(ROOT / "tests/k8s/cluster/cluster.sh"), "load-image", tag],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        engine.images.remove(tag)
        engine.close()
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def stubborn_image(kube: client.ApiClient, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Writes results (and hostile entries), then ignores SIGTERM."""
    return _script_image(tmp_path_factory, "stubborn", STUBBORN_SH)


@pytest.fixture(scope="session")
def netprobe_image(kube: client.ApiClient, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Serves HTTP on 4263, or tries connections and says which got through."""
    return _script_image(tmp_path_factory, "netprobe", NETPROBE_SH)


def pod_ip(core: client.CoreV1Api, ns: str, pod: str, timeout: float) -> str:
    """The address of `pod` once it runs."""
    deadline = time.monotonic() + timeout
    found: Any = None
    while time.monotonic() < deadline:
        found = core.read_namespaced_pod(pod, ns)
        if found.status.phase == "Running" and found.status.pod_ip:
            return str(found.status.pod_ip)
        time.sleep(0.3)
    raise AssertionError(f"pod {pod} never ran: {found.status if found else None}")


@contextlib.contextmanager
def standin_pod(
    core: client.CoreV1Api, ns: str, image: str, name: str, timeout: float = 120
) -> Iterator[str]:
    """The stand-in for the internet: an HTTP server on port 80 in a pod of its own that
    no run's policy selects (pods here have no route off the machine, and the cluster's
    guard drops pod-to-host connections, so a host target would prove only the guard).
    Yields its address once it runs; deleted after."""
    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels={"app": "standin"}),
            spec=client.V1PodSpec(
                containers=[
                    client.V1Container(
                        name="web",
                        image=image,
                        command=["httpd", "-f", "-p", "80", "-h", "/srv/www"],
                    )
                ],
                restart_policy="Never",
                termination_grace_period_seconds=0,
                automount_service_account_token=False,
            ),
        ),
    )
    try:
        yield pod_ip(core, ns, name, timeout)
    finally:
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
