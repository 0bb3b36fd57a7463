"""The model gateway on Kubernetes, as runs use it: find its pod, open and close run keys.

The gateway (deployed by `ssebench proxy up --backend k8s`, see `_gateway_deploy`)
is one pod of the Deployment `ssebench-gateway` in the runs' namespace, labelled
`ssebench.gateway=ssebench-gateway`. Runs reach it at its pod's address
(`SSE_BASE_URL` is `http://<pod IP>:4000`): the test cluster has neither
kube-proxy nor cluster DNS, so a Service would have no data path and no name,
and a pod address is what every cluster offers. A run's NetworkPolicy allows
egress to the gateway's pods by pod selector, on its port, and nothing else
when restricted (`_objects.network_policy`).

The run keys, budgets and spend are the same SQLite key store as on Docker
(`ssebench_gateway_store`), in an emptyDir of the gateway's pod (it survives a
restart of the proxy's container, not the pod's deletion). The runner reaches it
the way it reaches runs, through the API: `pods/exec` of
`python3.11 -m ssebench_gateway_admin` in the proxy's container, which its Role
already has. No secret is on that command line: the key is made in the pod and
comes back once on the exec's stdout. Once a run's pod has an address, its key
is bound to it, so the key works from that pod only.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

import msgspec
from kubernetes import client
from typing_extensions import override

from ssebench.backends.k8s._api import api_errors
from ssebench.backends.k8s._exec import run_in
from ssebench.spec import (
    DEFAULT_RESERVATION,
    BackendError,
    GatewayReport,
    ModelGateway,
)

GATEWAY_NAME: Final = "ssebench-gateway"
"""The name of the gateway's Deployment, Secret and NetworkPolicy."""

GATEWAY_LABEL: Final = "ssebench.gateway"
"""On the gateway's pods (value `GATEWAY_NAME`): runs' NetworkPolicies select them by it."""

GATEWAY_PORT: Final = 4000
"""The port the proxy listens on."""

PROXY_CONTAINER: Final = "proxy"
"""The gateway pod's container."""

ADMIN: Final = ("python3.11", "-m", "ssebench_gateway_admin")
"""The key store's command in the proxy's image (images/proxy/ssebench_gateway_admin.py)."""

_NOT_RUNNING: Final = (
    "no model gateway runs in namespace {ns}: start it with "
    "`ssebench proxy up --backend k8s` (with the cluster's admin rights)"
)


def gateway_pod(core: client.CoreV1Api, ns: str) -> Any | None:
    """The gateway's running pod (one with an address, not being deleted), or None."""
    with api_errors("finding the model gateway"):
        pods: Any = core.list_namespaced_pod(ns, label_selector=f"{GATEWAY_LABEL}={GATEWAY_NAME}")
    for pod in pods.items:
        if (
            pod.metadata.deletion_timestamp is None
            and pod.status.phase == "Running"
            and pod.status.pod_ip
        ):
            return pod
    return None


def admin(core: client.CoreV1Api, ns: str, pod: str, *args: str) -> dict[str, Any]:
    """Run one command of the key store in the gateway's pod; its JSON answer.

    Raises:
        BackendError: the exec failed or the command did (its output is never echoed:
            it may hold a key).
    """
    code, out = run_in(core, ns, pod, PROXY_CONTAINER, [*ADMIN, *args], timeout=60)
    with out:
        text = out.read()
    if code != 0:
        raise BackendError(f"the model gateway's key store failed ({args[0]}: exit {code})")
    try:
        answer = json.loads(text)
    except ValueError:
        raise BackendError(f"the model gateway's key store gave no answer ({args[0]})") from None
    if not isinstance(answer, dict):
        raise BackendError(f"the model gateway's key store gave no answer ({args[0]})")
    return answer


class K8sGateway(ModelGateway):
    """The gateway's pod, as the runner uses it: its URL, and run keys by exec."""

    def __init__(
        self,
        core: client.CoreV1Api,
        ns: str,
        *,
        pod: str,
        address: str,
        reservation: float = DEFAULT_RESERVATION,
    ) -> None:
        self._core = core
        self._ns = ns
        self.pod = pod
        self.address = address
        self._reservation = reservation

    @classmethod
    def find(
        cls, core: client.CoreV1Api, ns: str, reservation: float = DEFAULT_RESERVATION
    ) -> K8sGateway:
        """The running gateway of namespace `ns`.

        Raises:
            BackendError: none runs there.
        """
        pod = gateway_pod(core, ns)
        if pod is None:
            raise BackendError(_NOT_RUNNING.format(ns=ns))
        return cls(
            core, ns, pod=pod.metadata.name, address=pod.status.pod_ip, reservation=reservation
        )

    @override
    def __repr__(self) -> str:
        return f"K8sGateway(namespace={self._ns!r}, pod={self.pod!r})"

    @property
    @override
    def base_url(self) -> str:
        return f"http://{self.address}:{GATEWAY_PORT}"

    def models(self) -> list[str]:
        """The models the gateway serves."""
        return [str(m) for m in admin(self._core, self._ns, self.pod, "models")["models"]]

    @override
    def open_key(self, run_id: str, models: list[str], budget: float | None) -> str:
        served = self.models()
        missing = [m for m in models if m not in served]
        if missing:
            raise BackendError(
                f"the model gateway does not serve {', '.join(missing)} (it serves "
                f"{', '.join(served) or 'none'}): set its provider key and run "
                "`ssebench proxy up --backend k8s` again"
            )
        answer = admin(
            self._core,
            self._ns,
            self.pod,
            "open",
            run_id,
            json.dumps(models),
            "none" if budget is None else repr(float(budget)),
            repr(float(self._reservation)),
        )
        key = answer.get("key")
        if not isinstance(key, str) or not key:
            raise BackendError("the model gateway's key store made no key")
        return key

    def bind(self, run_id: str, address: str) -> None:
        """Let the run's key be used from `address` (its pod's) only."""
        admin(self._core, self._ns, self.pod, "bind", run_id, f"{address}/32")

    @override
    def close_key(self, run_id: str) -> GatewayReport | None:
        used = admin(self._core, self._ns, self.pod, "close", run_id).get("report")
        if not isinstance(used, dict):
            return None
        try:
            return msgspec.convert(used, GatewayReport)
        except msgspec.ValidationError as exc:
            raise BackendError(f"the gateway reported the run's usage wrongly: {exc}") from exc


def bind_run(core: client.CoreV1Api, ns: str, pod: str, run_id: str, timeout: float = 60) -> None:
    """Bind the run's key to its pod's address, as soon as the pod has one.

    Raises:
        BackendError: the pod got no address in `timeout` seconds, or the gateway is gone.
    """
    deadline = time.monotonic() + timeout
    while True:
        with api_errors(f"finding the address of run {run_id}"):
            found: Any = core.read_namespaced_pod(pod, ns)
        if found.status.pod_ip:
            break
        if time.monotonic() > deadline:
            raise BackendError(f"run {run_id} got no address in {timeout:.0f}s")
        time.sleep(0.1)
    K8sGateway.find(core, ns).bind(run_id, found.status.pod_ip)
