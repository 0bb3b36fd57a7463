"""The pods `_rest` decodes read as the client's models do, for the code that reads them."""

from __future__ import annotations

import json

from ssebench.backends.k8s._backend import _run_info, _started_images, _state
from ssebench.backends.k8s._rest import _pod
from ssebench.spec import labels

POD = {
    "kind": "Pod",
    "metadata": {
        "name": "ssebench-r1-abc123-xyz",
        "namespace": "ns",
        "labels": {
            labels.RUN_ID: "r1",
            "ssebench.name": "ssebench-r1-abc123",
            "ssebench.keep": "true",
        },
        "annotations": {
            labels.RESULTS: "/home/u/results/r1",
            labels.LEASE_RENEWED: "2026-12-01T06:00:00Z",
        },
        "creationTimestamp": "2026-12-01T05:59:58Z",
        "resourceVersion": "42",
        "uid": "not read",
    },
    "spec": {"containers": [{"name": "run", "image": "reg/agent-dummy/t:1"}, {"name": "keeper"}]},
    "status": {
        "phase": "Running",
        "initContainerStatuses": [
            {"name": "policy-wait", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ],
        "containerStatuses": [
            {"name": "keeper", "state": {"running": {"startedAt": "2026-12-01T06:00:01Z"}}},
            {
                "name": "run",
                "imageID": "reg/agent-dummy/t@sha256:00",
                "state": {"terminated": {"exitCode": 143, "reason": "Error"}},
            },
        ],
    },
}


def test_a_decoded_pod_reads_as_the_model_does() -> None:
    pod = _pod.decode(json.dumps(POD))

    assert _state(pod) == ("exited", 143)
    info = _run_info(pod, {**pod.metadata.annotations, **pod.metadata.labels})
    assert (info.run_id, info.name, info.image) == (
        "r1",
        "ssebench-r1-abc123",
        "reg/agent-dummy/t:1",
    )
    assert info.created_at == "2026-12-01T05:59:58Z"
    assert info.labels[labels.RESULTS] == "/home/u/results/r1"
    assert info.labels[labels.LEASE_RENEWED] == "2026-12-01T06:00:00Z"
    assert info.handle.keep and info.handle.pod == "ssebench-r1-abc123-xyz"
    assert info.handle.namespace == "ns"


def test_a_pending_pod_without_statuses_is_created() -> None:
    pod = _pod.decode(json.dumps({"metadata": {"name": "p"}, "status": {"phase": "Pending"}}))

    assert _state(pod) == ("created", None)


def test_the_images_a_run_started_from_are_the_digests_its_containers_report() -> None:
    """The keeper holds storage and is no image of the run; a container the kubelet has
    not resolved yet says nothing."""
    sidecar = json.loads(json.dumps(POD))
    statuses = sidecar["status"]["containerStatuses"]
    statuses[0]["imageID"] = "reg/agent-dummy/t@sha256:11"  # the keeper's
    statuses.append({"name": "task", "imageID": "reg/tool-sidecar/t@sha256:22"})

    assert _started_images(_pod.decode(json.dumps(POD))) == {"agent": "reg/agent-dummy/t@sha256:00"}
    assert _started_images(_pod.decode(json.dumps(sidecar))) == {
        "agent": "reg/agent-dummy/t@sha256:00",
        "environment": "reg/tool-sidecar/t@sha256:22",
    }
    statuses[1]["imageID"] = ""
    assert _started_images(_pod.decode(json.dumps(sidecar))) == {
        "environment": "reg/tool-sidecar/t@sha256:22"
    }
