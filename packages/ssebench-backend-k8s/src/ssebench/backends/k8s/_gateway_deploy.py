"""`ssebench proxy up|down|status --backend k8s`: the gateway's namespace and objects.

Run with the cluster's admin rights (the backend's Role cannot create Deployments).
In the gateway's namespace (`SSEBENCH_K8S_GATEWAY_NAMESPACE`, created if missing):

- Secret `ssebench-gateway`: LiteLLM's configuration (models with their provider
  keys, the master key) and the admin token. The proxy's container mounts the
  configuration read-only at /run/ssebench-gateway, the admin container the token
  only; never in the pod spec, an environment variable or an argument. The master
  key and the token are kept from one `up` to the next.
- Deployment `ssebench-gateway`: one pod (Recreate), the gateway image by digest
  (pushed by the CLI to `SSEBENCH_REGISTRY`), running as nobody with a read-only
  root, no capabilities and no service account token; an init container creates
  the key store in the pod's emptyDir, the admin container serves it
  (`ssebench_gateway_admin serve`). Each container has a readiness probe; the pod
  template carries a digest of the configuration, image and runs' namespace: a
  changed one makes a new pod, an unchanged `up` keeps the running one.
- Service `ssebench-gateway-admin`: the admin port, which the runner reaches
  through the API server's service proxy (the one right of its Role here).
- NetworkPolicy `ssebench-gateway`: the proxy's port takes connections from the
  runs' pods only (their namespace and label `ssebench.backend=k8s`); the admin
  port from wherever the API server's proxy connects (the token guards it: a
  restricted run's own policy lets it reach the proxy's port only); egress free
  (the providers).

In the runs' namespace: Secret `ssebench-gateway-token`, the admin token, which
the backend's Role may `get` by name.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import yaml
from kubernetes import client

from ssebench.backends.k8s._api import api_errors
from ssebench.backends.k8s._gateway import (
    ADMIN,
    ADMIN_CONTAINER,
    ADMIN_PORT,
    ADMIN_SERVICE,
    GATEWAY_LABEL,
    GATEWAY_NAME,
    GATEWAY_PORT,
    PROXY_CONTAINER,
    TOKEN_SECRET,
    K8sGateway,
)
from ssebench.backends.k8s._objects import BACKEND_LABEL, NAMESPACE_NAME_LABEL
from ssebench.spec import BackendError, PlatformNotFoundError, PlatformRefusedError

CONFIG_MOUNT: Final = "/run/ssebench-gateway"
"""Where the proxy reads config.yaml (the Secret, read-only)."""

TOKEN_MOUNT: Final = "/run/ssebench-admin"  # noqa: S105 - a folder
"""Where the admin container reads its token (`ssebench_gateway_admin.TOKEN_FILE`'s folder)."""

STATE_MOUNT: Final = "/var/lib/ssebench-gateway"
"""The key store's folder: an emptyDir of the pod."""

CONFIG_KEY: Final = "config.yaml"
TOKEN_KEY: Final = "admin-token"  # noqa: S105 - a key's name
"""The gateway Secret's keys."""

DIGEST_ANNOTATION: Final = "ssebench.gateway-digest"
"""On the pod template: digest of the configuration (without its keys), image and runs'
namespace."""

START_TIMEOUT: Final = 300.0
"""Seconds the gateway's pod may take to pull its image and be ready."""

_NOBODY: Final = 65534


@dataclass(frozen=True)
class K8sGatewayStatus:
    """What `ssebench proxy status --backend k8s` shows."""

    name: str
    state: str
    """The pod's phase (`running`, `pending`, ...), or `absent`."""
    image: str | None = None
    address: str | None = None
    """`pod IP:port`, where runs reach it."""
    models: tuple[str, ...] = ()


def _labels() -> dict[str, str]:
    return {GATEWAY_LABEL: GATEWAY_NAME}


def config_digest(config: dict[str, Any], image: str, runs_ns: str = "") -> str:
    """What tells one deployment of the gateway from another (no key in it in clear)."""
    stable = copy.deepcopy(config)
    stable.get("general_settings", {}).pop("master_key", None)
    text = json.dumps({"config": stable, "image": image, "runs": runs_ns}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _served(config: dict[str, Any]) -> list[str]:
    return sorted(str(entry["model_name"]) for entry in config.get("model_list", []))


def _ready_on(port: int, path: str) -> client.V1Probe:
    # Checked every second, so that `up` sees a new pod ready soon; taken out of its
    # Service only after ten misses in a row: a proxy slow to answer on a busy node is
    # still the gateway, and an unready pod is "no gateway" to every run.
    return client.V1Probe(
        http_get=client.V1HTTPGetAction(path=path, port=port),
        period_seconds=1,
        timeout_seconds=5,
        failure_threshold=10,
    )


def deployment(image: str, digest: str, models: list[str] | None = None) -> client.V1Deployment:
    """The gateway's Deployment: one pod, the proxy's and the admin's containers, the
    store's init."""
    security = client.V1SecurityContext(
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        run_as_non_root=True,
        run_as_user=_NOBODY,
        run_as_group=_NOBODY,
        capabilities=client.V1Capabilities(drop=["ALL"]),
    )
    state = client.V1VolumeMount(name="state", mount_path=STATE_MOUNT)
    tmp = client.V1VolumeMount(name="tmp", mount_path="/tmp")
    proxy = client.V1Container(
        name=PROXY_CONTAINER,
        image=image,
        ports=[client.V1ContainerPort(container_port=GATEWAY_PORT, name="http")],
        volume_mounts=[
            client.V1VolumeMount(name="config", mount_path=CONFIG_MOUNT, read_only=True),
            state,
            tmp,
        ],
        readiness_probe=_ready_on(GATEWAY_PORT, "/health/liveliness"),
        security_context=security,
    )
    admin = client.V1Container(
        name=ADMIN_CONTAINER,
        image=image,
        command=[*ADMIN, "serve"],
        ports=[client.V1ContainerPort(container_port=ADMIN_PORT, name="admin")],
        env=[
            client.V1EnvVar(name="GATEWAY_MODELS", value=json.dumps(models or [])),
            client.V1EnvVar(
                name="GATEWAY_POD_ADDRESS",
                value_from=client.V1EnvVarSource(
                    field_ref=client.V1ObjectFieldSelector(field_path="status.podIP")
                ),
            ),
        ],
        volume_mounts=[
            client.V1VolumeMount(name="token", mount_path=TOKEN_MOUNT, read_only=True),
            state,
            tmp,
        ],
        readiness_probe=_ready_on(ADMIN_PORT, "/health"),
        security_context=security,
    )
    init = client.V1Container(
        name="store",
        image=image,
        command=[*ADMIN, "init"],
        volume_mounts=[state, tmp],
        security_context=security,
    )

    def secret(name: str, key: str, path: str) -> client.V1Volume:
        return client.V1Volume(
            name=name,
            secret=client.V1SecretVolumeSource(
                secret_name=GATEWAY_NAME,
                items=[client.V1KeyToPath(key=key, path=path)],
                default_mode=0o440,
            ),
        )

    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=GATEWAY_NAME, labels=_labels()),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels=_labels()),
            strategy=client.V1DeploymentStrategy(type="Recreate"),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(
                    labels=_labels(), annotations={DIGEST_ANNOTATION: digest}
                ),
                spec=client.V1PodSpec(
                    init_containers=[init],
                    containers=[proxy, admin],
                    volumes=[
                        secret("config", CONFIG_KEY, CONFIG_KEY),
                        secret("token", TOKEN_KEY, "token"),
                        client.V1Volume(name="state", empty_dir=client.V1EmptyDirVolumeSource()),
                        client.V1Volume(
                            name="tmp",
                            empty_dir=client.V1EmptyDirVolumeSource(size_limit="256Mi"),
                        ),
                    ],
                    security_context=client.V1PodSecurityContext(fs_group=_NOBODY),
                    automount_service_account_token=False,
                    enable_service_links=False,
                    termination_grace_period_seconds=5,
                ),
            ),
        ),
    )


def admin_service() -> client.V1Service:
    """The admin port of the gateway's pods, for the API server's service proxy."""
    return client.V1Service(
        metadata=client.V1ObjectMeta(name=ADMIN_SERVICE, labels=_labels()),
        spec=client.V1ServiceSpec(
            selector=_labels(),
            # Unnamed: the service proxy's plain `<service>` form (the one name the
            # backend's Role allows) takes the port without a name.
            ports=[client.V1ServicePort(port=ADMIN_PORT, target_port=ADMIN_PORT)],
        ),
    )


def network_policy(runs_ns: str) -> client.V1NetworkPolicy:
    """The proxy's port from the runs' pods only; the admin port to the API server's proxy
    (the token guards it); egress free (the providers)."""
    runs = client.V1NetworkPolicyPeer(
        namespace_selector=client.V1LabelSelector(match_labels={NAMESPACE_NAME_LABEL: runs_ns}),
        pod_selector=client.V1LabelSelector(match_labels={BACKEND_LABEL: "k8s"}),
    )
    return client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name=GATEWAY_NAME, labels=_labels()),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(match_labels=_labels()),
            policy_types=["Ingress"],
            ingress=[
                client.V1NetworkPolicyIngressRule(
                    _from=[runs],
                    ports=[client.V1NetworkPolicyPort(protocol="TCP", port=GATEWAY_PORT)],
                ),
                client.V1NetworkPolicyIngressRule(
                    ports=[client.V1NetworkPolicyPort(protocol="TCP", port=ADMIN_PORT)],
                ),
            ],
        ),
    )


def _decoded(secret: Any, key: str) -> str | None:
    data = (secret.data or {}).get(key)
    return base64.b64decode(data).decode() if data else None


class GatewayDeployer:
    """Deploys, removes and describes the gateway of one namespace for the runs of another
    (cluster admin rights)."""

    def __init__(self, api: client.ApiClient, runs_ns: str, gateway_ns: str) -> None:
        self._api = api
        self._runs = runs_ns
        self._ns = gateway_ns
        self._core = client.CoreV1Api(api)
        self._apps = client.AppsV1Api(api)
        self._net = client.NetworkingV1Api(api)

    def _kept(self) -> tuple[str, str]:
        """The master key and admin token of the gateway's Secret, else fresh ones (never
        shown)."""
        master = token = None
        try:
            with api_errors("reading the gateway's Secret"):
                found: Any = self._core.read_namespaced_secret(GATEWAY_NAME, self._ns)
            token = _decoded(found, TOKEN_KEY)
            old = yaml.safe_load(_decoded(found, CONFIG_KEY) or "")
            master = old["general_settings"]["master_key"]
        except (PlatformNotFoundError, KeyError, TypeError, ValueError, yaml.YAMLError):
            pass
        if not isinstance(master, str) or not master:
            master = "sk-master-" + secrets.token_urlsafe(32)
        return master, token or secrets.token_urlsafe(32)

    def _apply(self, kind: str, create: Callable[[], Any], replace: Callable[[], Any]) -> None:
        try:
            with api_errors(f"creating the gateway's {kind}"):
                create()
        except PlatformRefusedError:
            # It exists (409): replace it with this one.
            with api_errors(f"replacing the gateway's {kind}"):
                replace()

    def _namespace(self) -> None:
        try:
            with api_errors(f"creating the gateway's namespace {self._ns}"):
                self._core.create_namespace(
                    client.V1Namespace(metadata=client.V1ObjectMeta(name=self._ns))
                )
        except PlatformRefusedError:
            with api_errors(f"reading the gateway's namespace {self._ns}"):
                self._core.read_namespace(self._ns)  # it exists (409); else say why not

    def _token_secret(self, token: str) -> None:
        """The admin token, in the runs' namespace, for the backend's Role to read."""
        secret = client.V1Secret(
            metadata=client.V1ObjectMeta(name=TOKEN_SECRET, labels=_labels()),
            string_data={"token": token},
            type="Opaque",
        )
        runs = self._runs
        self._apply(
            "token Secret",
            lambda: self._core.create_namespaced_secret(runs, secret),
            lambda: self._core.replace_namespaced_secret(TOKEN_SECRET, runs, secret),
        )

    def up(
        self, config: dict[str, Any], image: str, say: Callable[[str], None]
    ) -> K8sGatewayStatus:
        """Deploy the gateway with LiteLLM's `config` (its master key is set here), or keep it.

        Raises:
            BackendError: the cluster refused, or the gateway was not ready in time.
        """
        digest = config_digest(config, image, self._runs)
        current = self._deployment()
        annotations = (
            (current.spec.template.metadata.annotations or {}) if current is not None else {}
        )
        master, token = self._kept()
        # Every object but the Deployment is applied each time (an unchanged one stays as
        # it is): one deleted by hand comes back; a new pod only when the digest changed.
        self._namespace()
        config = copy.deepcopy(config)
        config.setdefault("general_settings", {})["master_key"] = master
        secret = client.V1Secret(
            metadata=client.V1ObjectMeta(name=GATEWAY_NAME, labels=_labels()),
            string_data={CONFIG_KEY: yaml.safe_dump(config), TOKEN_KEY: token},
            type="Opaque",
        )
        ns = self._ns
        self._apply(
            "Secret",
            lambda: self._core.create_namespaced_secret(ns, secret),
            lambda: self._core.replace_namespaced_secret(GATEWAY_NAME, ns, secret),
        )
        self._token_secret(token)
        policy = network_policy(self._runs)
        self._apply(
            "NetworkPolicy",
            lambda: self._net.create_namespaced_network_policy(ns, policy),
            lambda: self._net.replace_namespaced_network_policy(GATEWAY_NAME, ns, policy),
        )
        service = admin_service()
        self._apply(
            "Service",
            lambda: self._core.create_namespaced_service(ns, service),
            lambda: self._core.patch_namespaced_service(ADMIN_SERVICE, ns, service),
        )
        if annotations.get(DIGEST_ANNOTATION) == digest and self._ready_pod(digest):
            say(f"gateway: {GATEWAY_NAME} already runs this configuration")
            return self.status()
        wanted = deployment(image, digest, _served(config))
        say(f"gateway: deploying {GATEWAY_NAME} in namespace {ns} for the runs of {self._runs}")
        self._apply(
            "Deployment",
            lambda: self._apps.create_namespaced_deployment(ns, wanted),
            lambda: self._apps.replace_namespaced_deployment(GATEWAY_NAME, ns, wanted),
        )
        self.wait_ready(digest)
        return self.status()

    def _deployment(self) -> Any | None:
        try:
            with api_errors("reading the gateway's Deployment"):
                return self._apps.read_namespaced_deployment(GATEWAY_NAME, self._ns)
        except PlatformNotFoundError:
            return None

    def _pods(self) -> list[Any]:
        with api_errors("watching the gateway's pod"):
            pods: Any = self._core.list_namespaced_pod(
                self._ns, label_selector=f"{GATEWAY_LABEL}={GATEWAY_NAME}"
            )
        return [pod for pod in pods.items if pod.metadata.deletion_timestamp is None]

    def _ready_pod(self, digest: str | None = None) -> Any | None:
        """A pod of the gateway (of this `digest`, if given) whose containers are all ready."""
        for pod in self._pods():
            if digest is not None and (
                (pod.metadata.annotations or {}).get(DIGEST_ANNOTATION) != digest
            ):
                continue
            statuses = pod.status.container_statuses or []
            if pod.status.pod_ip and statuses and all(status.ready for status in statuses):
                return pod
        return None

    def wait_ready(self, digest: str, timeout: float = START_TIMEOUT) -> float:
        """Wait until the pod of this deployment is ready (both containers answer their
        probes); the seconds waited.

        Raises:
            BackendError: it was not ready in `timeout` seconds, or cannot start.
        """
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self._ready_pod(digest) is not None:
                return time.monotonic() - started
            for pod in self._pods():
                for status in [
                    *(pod.status.init_container_statuses or []),
                    *(pod.status.container_statuses or []),
                ]:
                    waiting = status.state.waiting if status.state else None
                    if waiting is not None and waiting.reason in (
                        "ErrImagePull",
                        "ImagePullBackOff",
                        "CrashLoopBackOff",
                        "CreateContainerConfigError",
                    ):
                        raise BackendError(
                            f"the gateway's pod cannot start ({status.name}): {waiting.reason}"
                        )
            time.sleep(0.5)
        raise BackendError(f"the gateway {GATEWAY_NAME} was not ready within {timeout:.0f}s")

    def down(self) -> bool:
        """Remove the gateway's objects (its namespace stays); True if there was a
        Deployment."""
        found = False
        ns = self._ns
        deletions: list[tuple[str, Callable[[], Any]]] = [
            (
                "Deployment",
                lambda: self._apps.delete_namespaced_deployment(
                    GATEWAY_NAME, ns, propagation_policy="Foreground"
                ),
            ),
            ("Secret", lambda: self._core.delete_namespaced_secret(GATEWAY_NAME, ns)),
            ("Service", lambda: self._core.delete_namespaced_service(ADMIN_SERVICE, ns)),
            (
                "NetworkPolicy",
                lambda: self._net.delete_namespaced_network_policy(GATEWAY_NAME, ns),
            ),
            (
                "token Secret",
                lambda: self._core.delete_namespaced_secret(TOKEN_SECRET, self._runs),
            ),
        ]
        for kind, delete in deletions:
            try:
                with api_errors(f"removing the gateway's {kind}"):
                    delete()
                found = found or kind == "Deployment"
            except PlatformNotFoundError:
                pass
        return found

    def status(self) -> K8sGatewayStatus:
        """The gateway's Deployment and pod as the cluster sees them; its models as its
        admin route, reached the runner's way, reports them."""
        current = self._deployment()
        if current is None:
            return K8sGatewayStatus(name=GATEWAY_NAME, state="absent")
        image = current.spec.template.spec.containers[0].image
        if self._ready_pod() is None:
            return K8sGatewayStatus(name=GATEWAY_NAME, state="pending", image=image)
        gateway = K8sGateway.find(self._api, self._runs, self._ns)
        return K8sGatewayStatus(
            name=GATEWAY_NAME,
            state="running",
            image=image,
            address=f"{gateway.address}:{GATEWAY_PORT}",
            models=tuple(gateway.models),
        )
