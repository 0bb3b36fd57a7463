"""`ssebench proxy up|down|status --backend k8s`: the gateway's Deployment, Secret and policy.

Run with the cluster's admin rights (the backend's Role cannot create Deployments):

- Secret `ssebench-gateway`: LiteLLM's configuration (models with their provider
  keys, the master key), mounted read-only at /run/ssebench-gateway in the proxy's
  container; never in the pod spec, an environment variable or an argument. Its
  master key is kept from one `up` to the next.
- Deployment `ssebench-gateway`: one pod (Recreate), the gateway image by
  digest (pushed by the CLI to `SSEBENCH_REGISTRY`), running as nobody with a
  read-only root, no capabilities and no service account token; an init
  container creates the key store in the pod's emptyDir. The pod template
  carries a digest of the configuration and image: a changed one makes a new
  pod, an unchanged `up` keeps the running one.
- NetworkPolicy `ssebench-gateway`: the gateway's pods take connections on its
  port from runs' pods only (label `ssebench.backend=k8s`); their egress is
  free (the providers).
"""

from __future__ import annotations

import contextlib
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
from ssebench.backends.k8s._exec import run_in
from ssebench.backends.k8s._gateway import (
    ADMIN,
    GATEWAY_LABEL,
    GATEWAY_NAME,
    GATEWAY_PORT,
    PROXY_CONTAINER,
    K8sGateway,
    gateway_pod,
)
from ssebench.backends.k8s._objects import BACKEND_LABEL
from ssebench.spec import BackendError, PlatformNotFoundError, PlatformRefusedError

CONFIG_MOUNT: Final = "/run/ssebench-gateway"
"""Where the proxy reads config.yaml (the Secret, read-only)."""

STATE_MOUNT: Final = "/var/lib/ssebench-gateway"
"""The key store's folder: an emptyDir of the pod."""

DIGEST_ANNOTATION: Final = "ssebench.gateway-digest"
"""On the pod template: digest of the configuration (without its master key) and image."""

START_TIMEOUT: Final = 300.0
"""Seconds the gateway's pod may take to pull its image and answer."""

_NOBODY: Final = 65534
_HEALTH: Final = (
    "import urllib.request, sys; "
    f"sys.exit(urllib.request.urlopen('http://127.0.0.1:{GATEWAY_PORT}/health/liveliness', "
    "timeout=2).status != 200)"
)


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


def config_digest(config: dict[str, Any], image: str) -> str:
    """What tells one deployment of the gateway from another (no key in it in clear)."""
    stable = copy.deepcopy(config)
    stable.get("general_settings", {}).pop("master_key", None)
    text = json.dumps({"config": stable, "image": image}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def deployment(image: str, digest: str) -> client.V1Deployment:
    """The gateway's Deployment: one pod, the proxy's container and the store's init."""
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
        security_context=security,
    )
    init = client.V1Container(
        name="store",
        image=image,
        command=[*ADMIN, "init"],
        volume_mounts=[state, tmp],
        security_context=security,
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
                    containers=[proxy],
                    volumes=[
                        client.V1Volume(
                            name="config",
                            secret=client.V1SecretVolumeSource(
                                secret_name=GATEWAY_NAME, default_mode=0o440
                            ),
                        ),
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


def network_policy() -> client.V1NetworkPolicy:
    """Ingress to the gateway's port from runs' pods only; egress free (the providers)."""
    return client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name=GATEWAY_NAME, labels=_labels()),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(match_labels=_labels()),
            policy_types=["Ingress"],
            ingress=[
                client.V1NetworkPolicyIngressRule(
                    _from=[
                        client.V1NetworkPolicyPeer(
                            pod_selector=client.V1LabelSelector(match_labels={BACKEND_LABEL: "k8s"})
                        )
                    ],
                    ports=[client.V1NetworkPolicyPort(protocol="TCP", port=GATEWAY_PORT)],
                )
            ],
        ),
    )


class GatewayDeployer:
    """Deploys, removes and describes the gateway of one namespace (cluster admin rights)."""

    def __init__(self, api: client.ApiClient, ns: str) -> None:
        self._api = api
        self._ns = ns
        self._core = client.CoreV1Api(api)
        self._apps = client.AppsV1Api(api)
        self._net = client.NetworkingV1Api(api)

    def _master_key(self) -> str:
        """The master key of the gateway's Secret, else a fresh one (never shown)."""
        import base64

        try:
            with api_errors("reading the gateway's Secret"):
                found: Any = self._core.read_namespaced_secret(GATEWAY_NAME, self._ns)
            old = yaml.safe_load(base64.b64decode((found.data or {})["config.yaml"]))
            key = old["general_settings"]["master_key"]
            if isinstance(key, str) and key:
                return key
        except (PlatformNotFoundError, KeyError, TypeError, ValueError, yaml.YAMLError):
            pass
        return "sk-master-" + secrets.token_urlsafe(32)

    def _apply(self, kind: str, create: Callable[[], Any], replace: Callable[[], Any]) -> None:
        try:
            with api_errors(f"creating the gateway's {kind}"):
                create()
        except PlatformRefusedError:
            # It exists (409): replace it with this one.
            with api_errors(f"replacing the gateway's {kind}"):
                replace()

    def up(
        self, config: dict[str, Any], image: str, say: Callable[[str], None]
    ) -> K8sGatewayStatus:
        """Deploy the gateway with LiteLLM's `config` (its master key is set here), or keep it.

        Raises:
            BackendError: the cluster refused, or the proxy did not answer in time.
        """
        digest = config_digest(config, image)
        current = self._deployment()
        annotations = (
            (current.spec.template.metadata.annotations or {}) if current is not None else {}
        )
        if annotations.get(DIGEST_ANNOTATION) == digest and gateway_pod(self._core, self._ns):
            say(f"gateway: {GATEWAY_NAME} already runs this configuration")
            return self.status()
        config = copy.deepcopy(config)
        config.setdefault("general_settings", {})["master_key"] = self._master_key()
        secret = client.V1Secret(
            metadata=client.V1ObjectMeta(name=GATEWAY_NAME, labels=_labels()),
            string_data={"config.yaml": yaml.safe_dump(config)},
            type="Opaque",
        )
        ns = self._ns
        self._apply(
            "Secret",
            lambda: self._core.create_namespaced_secret(ns, secret),
            lambda: self._core.replace_namespaced_secret(GATEWAY_NAME, ns, secret),
        )
        policy = network_policy()
        self._apply(
            "NetworkPolicy",
            lambda: self._net.create_namespaced_network_policy(ns, policy),
            lambda: self._net.replace_namespaced_network_policy(GATEWAY_NAME, ns, policy),
        )
        wanted = deployment(image, digest)
        say(f"gateway: deploying {GATEWAY_NAME} in namespace {ns}")
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

    def wait_ready(self, digest: str, timeout: float = START_TIMEOUT) -> float:
        """Wait until the pod of this deployment answers its liveness route; the seconds waited.

        Raises:
            BackendError: it did not answer in `timeout` seconds, or cannot start.
        """
        started = time.monotonic()
        selector = f"{GATEWAY_LABEL}={GATEWAY_NAME}"
        while time.monotonic() - started < timeout:
            with api_errors("watching the gateway's pod"):
                pods: Any = self._core.list_namespaced_pod(self._ns, label_selector=selector)
            for pod in pods.items:
                notes = pod.metadata.annotations or {}
                if notes.get(DIGEST_ANNOTATION) != digest or pod.metadata.deletion_timestamp:
                    continue
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
                        raise BackendError(f"the gateway's pod cannot start: {waiting.reason}")
                if pod.status.phase == "Running":
                    with contextlib.suppress(BackendError):
                        code, out = run_in(
                            self._core,
                            self._ns,
                            pod.metadata.name,
                            PROXY_CONTAINER,
                            ["python3.11", "-c", _HEALTH],
                            timeout=20,
                        )
                        out.close()
                        if code == 0:
                            return time.monotonic() - started
            time.sleep(0.5)
        raise BackendError(f"the gateway {GATEWAY_NAME} did not answer within {timeout:.0f}s")

    def down(self) -> bool:
        """Remove the gateway's Deployment, Secret and policy; True if there was a Deployment."""
        found = False
        deletions: list[tuple[str, Callable[[], Any]]] = [
            (
                "Deployment",
                lambda: self._apps.delete_namespaced_deployment(
                    GATEWAY_NAME, self._ns, propagation_policy="Foreground"
                ),
            ),
            ("Secret", lambda: self._core.delete_namespaced_secret(GATEWAY_NAME, self._ns)),
            (
                "NetworkPolicy",
                lambda: self._net.delete_namespaced_network_policy(GATEWAY_NAME, self._ns),
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
        """The gateway's Deployment and pod as the cluster sees them."""
        current = self._deployment()
        if current is None:
            return K8sGatewayStatus(name=GATEWAY_NAME, state="absent")
        image = current.spec.template.spec.containers[0].image
        pod = gateway_pod(self._core, self._ns)
        if pod is None:
            return K8sGatewayStatus(name=GATEWAY_NAME, state="pending", image=image)
        gateway = K8sGateway(self._core, self._ns, pod=pod.metadata.name, address=pod.status.pod_ip)
        return K8sGatewayStatus(
            name=GATEWAY_NAME,
            state="running",
            image=image,
            address=f"{pod.status.pod_ip}:{GATEWAY_PORT}",
            models=tuple(gateway.models()),
        )
