"""The cluster client and its errors mapped onto the interface's family."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Final

import urllib3.exceptions
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ssebench.spec import (
    BackendError,
    PlatformNotFoundError,
    PlatformRefusedError,
    PlatformUnavailableError,
    settings,
)

NAMESPACE_ENV: Final = settings.K8S_NAMESPACE.name
DEFAULT_NAMESPACE: Final = settings.K8S_NAMESPACE.default
GATEWAY_NAMESPACE_ENV: Final = settings.K8S_GATEWAY_NAMESPACE.name


def namespace() -> str:
    """The namespace runs live in: `SSEBENCH_K8S_NAMESPACE`, default `ssebench`."""
    return os.environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE


def gateway_namespace() -> str:
    """The model gateway's namespace: `SSEBENCH_K8S_GATEWAY_NAMESPACE`, default
    `ssebench-gateway`."""
    return os.environ.get(GATEWAY_NAMESPACE_ENV) or settings.K8S_GATEWAY_NAMESPACE.default


def api_client() -> client.ApiClient:
    """A client by the usual rules: `KUBECONFIG` or ~/.kube/config, else in-cluster.

    Raises:
        PlatformUnavailableError: no configuration is found.
    """
    try:
        # Read now, not at the client's import (which is where its default is taken).
        path = os.environ.get("KUBECONFIG") or "~/.kube/config"
        made: client.ApiClient = config.new_client_from_config(config_file=path)  # type: ignore[no-untyped-call]
        return made
    except config.ConfigException as first:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            return client.ApiClient()
        except config.ConfigException:
            raise PlatformUnavailableError(f"no Kubernetes configuration: {first}") from None


@contextlib.contextmanager
def api_errors(what: str) -> Iterator[None]:
    """Turn the client's errors into the interface's: `what` failed, and why (no bodies echoed)."""
    try:
        yield
    except ApiException as exc:
        # Only the status and the first words of the reason: a body (or the WebSocket
        # client's dump of one after " -+-+- ") may echo what was sent.
        said = str(exc.reason or "").split(" -+-+- ")[0][:80]
        status = exc.status or 0
        if not status and "Handshake status " in said:
            status = int(said.split("Handshake status ")[1].split()[0])
        reason = f"{what} failed: the cluster answered {status} {said}"
        if status == 404:
            raise PlatformNotFoundError(reason) from None
        raise PlatformRefusedError(reason) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise PlatformUnavailableError(f"{what} failed: {type(exc).__name__}") from None
    except BackendError:
        raise
