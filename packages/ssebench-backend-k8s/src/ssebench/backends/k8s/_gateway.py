"""The model gateway on Kubernetes, as runs use it: its address, and run keys opened and closed.

The gateway (deployed by `ssebench proxy up --backend k8s`, see `_gateway_deploy`)
is one pod of the Deployment `ssebench-gateway` in a namespace of its own
(`SSEBENCH_K8S_GATEWAY_NAMESPACE`, default `ssebench-gateway`), which holds the
provider keys. The backend's Role holds one right there: `services/proxy` on the
Service `ssebench-gateway-admin`, by name (`gateway-role.yaml`). Whoever holds the
runner's credentials can thus open, bind and close run keys, and nothing else: no
exec into the gateway's pod, no read of its Secret, no look at its pods.

The runner speaks to the key store's admin route (`images/proxy/ssebench_gateway_admin.py`)
through the API server's service proxy, so it works from outside the pod network
too, with the admin token of the Secret `ssebench-gateway-token` in the runs'
namespace (the Role may `get` that one Secret) in a header of its own: the API
server consumes `Authorization`.

Runs reach the proxy at its pod's address (`SSE_BASE_URL` is `http://<pod IP>:4000`,
which the admin route reports): the test cluster has neither kube-proxy nor
cluster DNS, so a Service would have no data path and no name, and a pod address
is what every cluster offers. A run's NetworkPolicy allows egress to the gateway's
pods by namespace and pod selector, on its port, and nothing else when restricted
(`_objects.network_policy`). Once a run's pod has an address, its key is bound to
it, so the key works from that pod only.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any, Final, NoReturn

import msgspec
import urllib3.exceptions
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from typing_extensions import override

from ssebench.backends.k8s import _rest as rest
from ssebench.backends.k8s._api import api_errors
from ssebench.spec import (
    DEFAULT_RESERVATION,
    BackendError,
    GatewayReport,
    ModelGateway,
    PlatformNotFoundError,
)

GATEWAY_NAME: Final = "ssebench-gateway"
"""The name of the gateway's Deployment, Secret and NetworkPolicy (its namespace's)."""

GATEWAY_LABEL: Final = "ssebench.gateway"
"""On the gateway's pods (value `GATEWAY_NAME`): runs' NetworkPolicies select them by it."""

GATEWAY_PORT: Final = 4000
"""The port the proxy listens on."""

PROXY_CONTAINER: Final = "proxy"
"""The gateway pod's container that holds the provider keys."""

ADMIN_CONTAINER: Final = "admin"
"""The gateway pod's container that serves the key store's admin route."""

ADMIN_SERVICE: Final = "ssebench-gateway-admin"
"""The Service of the admin route: the one name the backend's Role may proxy to."""

ADMIN_PORT: Final = 4001
"""The admin route's port (`ssebench_gateway_admin.ADMIN_PORT`)."""

TOKEN_HEADER: Final = "X-SSEBench-Gateway-Token"  # noqa: S105 - a header's name
"""The header the admin route reads its token from (`ssebench_gateway_admin.TOKEN_HEADER`)."""

TOKEN_SECRET: Final = "ssebench-gateway-token"  # noqa: S105 - a Secret's name
"""The Secret of the runs' namespace that holds the admin token (key `token`)."""

ADMIN: Final = ("python3.11", "-m", "ssebench_gateway_admin")
"""The key store's command in the proxy's image."""

_TIMEOUT: Final = 60.0
"""Seconds one admin call may take (a close waits for the run's last calls to settle)."""

UNREADY_WAIT: Final = 60.0
"""Seconds an admin call waits for a gateway pod that is there but not ready (the API
server answers 503: the call never reached it, so it is sent again). A pod whose probe
missed a beat on a busy node is not a gateway that does not run."""

_UNREADY_PAUSE: Final = 2.0


def _not_running(ns: str) -> str:
    return (
        f"no model gateway runs in namespace {ns}: start it with "
        "`ssebench proxy up --backend k8s` (with the cluster's admin rights)"
    )


def read_token(api: client.ApiClient, runs_ns: str, gateway_ns: str) -> str:
    """The admin token of the runs' namespace's Secret.

    Raises:
        BackendError: it is missing (no gateway was deployed for these runs) or unreadable.
    """
    try:
        with api_errors(f"reading the Secret {TOKEN_SECRET}"):
            found = rest.request(api, "GET", f"/api/v1/namespaces/{runs_ns}/secrets/{TOKEN_SECRET}")
    except PlatformNotFoundError:
        raise BackendError(_not_running(gateway_ns)) from None
    data = (json.loads(found.data).get("data") or {}).get("token")
    if not isinstance(data, str) or not data:
        raise BackendError(f"the Secret {TOKEN_SECRET} of namespace {runs_ns} holds no token")
    return base64.b64decode(data).decode()


def admin_call(
    api: client.ApiClient,
    gateway_ns: str,
    token: str,
    method: str,
    route: str,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One call of the gateway's admin route, through the API server's service proxy.

    Raises:
        BackendError: the gateway is not there or not ready, the Role may not reach it,
            it refused the token, or it gave no answer (its body is never echoed: it
            may hold a key).
    """
    path = f"/api/v1/namespaces/{gateway_ns}/services/{ADMIN_SERVICE}/proxy{route}"
    what = f"the model gateway's admin route ({method} {route.split('/')[1]})"
    deadline = time.monotonic() + UNREADY_WAIT
    while True:
        try:
            answer = rest.request(
                api,
                method,
                path,
                body=body if method == "POST" else None,
                headers={TOKEN_HEADER: token},
                timeout=_TIMEOUT,
            )
            break
        except ApiException as exc:
            if exc.status != 503 or time.monotonic() >= deadline:
                _refused(exc, gateway_ns, what)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise BackendError(f"{what} failed: {type(exc).__name__}") from None
        time.sleep(_UNREADY_PAUSE)
    try:
        decoded = json.loads(answer.data)
    except ValueError:
        decoded = None
    if not isinstance(decoded, dict):
        raise BackendError(f"{what} gave no answer")
    return decoded


def _refused(exc: ApiException, gateway_ns: str, what: str) -> NoReturn:
    """The error of an admin call the API server or the gateway refused."""
    status = exc.status or 0
    if status in (404, 503):  # no Service, or no ready pod behind it
        raise BackendError(_not_running(gateway_ns)) from None
    if status == 403:
        raise BackendError(
            f"{what}: the cluster refused (403): the backend's identity needs "
            f"gateway-role.yaml's Role in namespace {gateway_ns}"
        ) from None
    if status == 401:
        raise BackendError(
            f"{what}: refused (401): the token of the Secret {TOKEN_SECRET} is not the "
            "gateway's, or the cluster did not take these credentials; run "
            "`ssebench proxy up --backend k8s` again"
        ) from None
    raise BackendError(f"{what} failed: the cluster answered {status}") from None


class K8sGateway(ModelGateway):
    """The gateway as the runner uses it: its URL, and run keys through its admin route."""

    def __init__(
        self,
        api: client.ApiClient,
        gateway_ns: str,
        *,
        token: str,
        address: str,
        models: list[str],
        reservation: float = DEFAULT_RESERVATION,
    ) -> None:
        self._api = api
        self._ns = gateway_ns
        self._token = token
        self.address = address
        self.models = models
        self._reservation = reservation

    @classmethod
    def find(
        cls,
        api: client.ApiClient,
        runs_ns: str,
        gateway_ns: str,
        reservation: float = DEFAULT_RESERVATION,
    ) -> K8sGateway:
        """The gateway of `gateway_ns`, with the token of `runs_ns`.

        Raises:
            BackendError: none runs there, or it cannot be reached.
        """
        token = read_token(api, runs_ns, gateway_ns)
        info = admin_call(api, gateway_ns, token, "GET", "/info")
        address, models = info.get("address"), info.get("models")
        if not isinstance(address, str) or not address or not isinstance(models, list):
            raise BackendError("the model gateway's admin route gave no address")
        return cls(
            api,
            gateway_ns,
            token=token,
            address=address,
            models=[str(model) for model in models],
            reservation=reservation,
        )

    @override
    def __repr__(self) -> str:
        return f"K8sGateway(namespace={self._ns!r}, address={self.address!r})"

    @property
    @override
    def base_url(self) -> str:
        return f"http://{self.address}:{GATEWAY_PORT}"

    def _call(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        return admin_call(self._api, self._ns, self._token, "POST", route, body)

    @override
    def open_key(self, run_id: str, models: list[str], budget: float | None) -> str:
        missing = [m for m in models if m not in self.models]
        if missing:
            raise BackendError(
                f"the model gateway does not serve {', '.join(missing)} (it serves "
                f"{', '.join(self.models) or 'none'}): set its provider key and run "
                "`ssebench proxy up --backend k8s` again"
            )
        answer = self._call(
            "/keys",
            {
                "run_id": run_id,
                "models": models,
                "budget": budget,
                "reservation": self._reservation,
            },
        )
        key = answer.get("key")
        if not isinstance(key, str) or not key:
            raise BackendError("the model gateway's key store made no key")
        return key

    def bind(self, run_id: str, address: str) -> None:
        """Let the run's key be used from `address` (its pod's) only."""
        self._call(f"/keys/{run_id}/bind", {"network": f"{address}/32"})

    @override
    def close_key(self, run_id: str) -> GatewayReport | None:
        used = self._call(f"/keys/{run_id}/close", {}).get("report")
        if not isinstance(used, dict):
            return None
        try:
            return msgspec.convert(used, GatewayReport)
        except msgspec.ValidationError as exc:
            raise BackendError(f"the gateway reported the run's usage wrongly: {exc}") from exc


def bind_run(
    api: client.ApiClient,
    runs_ns: str,
    gateway_ns: str,
    pod: str,
    run_id: str,
    timeout: float = 60,
) -> None:
    """Bind the run's key to its pod's address, as soon as the pod has one.

    Raises:
        BackendError: the pod got no address in `timeout` seconds, or the gateway is gone.
    """
    deadline = time.monotonic() + timeout
    while True:
        with api_errors(f"finding the address of run {run_id}"):
            address = rest.read_pod(api, runs_ns, pod).status.pod_ip
        if address:
            break
        if time.monotonic() > deadline:
            raise BackendError(f"run {run_id} got no address in {timeout:.0f}s")
        time.sleep(0.1)
    K8sGateway.find(api, runs_ns, gateway_ns).bind(run_id, address)
