"""The runner's renewed lease on a cluster: the `ssebench.lease.renewed` annotation of a run's pod.

A cluster's runs may be reaped from another machine than their runner's, where
the runner's PID says nothing (`ssebench.spec.lease`). So while the runner
lives, a thread of the backend in the runner's process renews the annotation
every `RENEW_EVERY` seconds (one PATCH of the pod's metadata), from `start`
until `cleanup` or `remove`, or until the pod is gone. A runner that dies stops
renewing it: `ssebench runs reap` takes its run for dead at once on the
runner's machine (its PID is gone) and `LEASE_TTL` seconds later anywhere else.
"""

from __future__ import annotations

import logging
import threading

from kubernetes import client

from ssebench.backends.k8s import _rest as rest
from ssebench.backends.k8s._api import api_errors
from ssebench.spec import BackendError, PlatformNotFoundError
from ssebench.spec.lease import RENEW_EVERY, renewal

log = logging.getLogger(__name__)


def renew(api: client.ApiClient, namespace: str, pod: str) -> None:
    """Renew the lease on `pod` now.

    Raises:
        BackendError: the pod is gone (`PlatformNotFoundError`) or the cluster refused.
    """
    with api_errors(f"renewing the lease of {pod}"):
        rest.request(
            api,
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{pod}",
            body={"metadata": {"annotations": renewal()}},
            timeout=(10, 30),
        ).drain_conn()


class Renewer:
    """Renews one run's lease in a daemon thread until `stop` (or the process ends)."""

    def __init__(self, api: client.ApiClient, namespace: str, pod: str) -> None:
        self._api = api
        self._namespace = namespace
        self._pod = pod
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease {pod}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(RENEW_EVERY):
            try:
                renew(self._api, self._namespace, self._pod)
            except PlatformNotFoundError:
                return  # removed: nothing left to lease
            except BackendError as exc:
                # A missed renewal is not fatal: the lease lasts several of them.
                log.warning("%s", exc)
