"""The package's Role is all the backend gets: the other tests run with it; here, what it denies."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.k8s


def _denied(call: object) -> int:
    try:
        call()  # type: ignore[operator]
    except ApiException as exc:
        return int(exc.status)
    return 0


def test_the_service_account_cannot_read_secrets_or_leave_its_namespace(
    role_kubeconfig: Path, backend_namespace: str
) -> None:
    api = config.new_client_from_config(config_file=str(role_kubeconfig))  # type: ignore[no-untyped-call]
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    ns = backend_namespace
    assert _denied(lambda: core.list_namespaced_secret(ns)) == 403
    assert _denied(lambda: core.read_namespaced_secret("anything", ns)) == 403
    assert _denied(lambda: core.list_namespaced_pod("default")) == 403
    assert _denied(lambda: core.list_node()) == 403
    assert _denied(lambda: batch.list_namespaced_job(ns)) == 403
    assert _denied(lambda: core.list_namespaced_pod(ns)) == 0
