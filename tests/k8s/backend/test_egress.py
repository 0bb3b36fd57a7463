"""A run's NetworkPolicy on the test cluster, attacked from real pods.

The stand-in for the internet is a pod of its own that no run's policy selects
(pods here have no route off the machine, and the cluster's guard already drops
pod-to-host connections, so a host target would prove only the guard).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ssebench.spec import Egress, Mount, NetworkPolicy, RunSpec, contract, get_backend, labels

from .conftest import pod_ip, standin_pod

# The policy's wait is timed (a second of silence): not under another test's load.
pytestmark = [pytest.mark.k8s, pytest.mark.alone]


def _spec(image: str, run_dir: Path, run_id: str, egress: Egress, env: dict[str, str]) -> RunSpec:
    (run_dir / "archive").mkdir(parents=True)
    return RunSpec(
        run_id=run_id,
        task_name="t",
        mode="sandbox",
        image=image,
        env=env,
        results=Mount(target=contract.RESULTS_DIR, source=str(run_dir)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(run_dir / "archive")),
        labels={labels.RUN_ID: run_id},
        network=NetworkPolicy(egress=egress),
    )


def test_restricted_reaches_nothing_and_open_reaches_the_stand_in_only(
    netprobe_image: str,
    test_image: Any,
    k8s_env: dict[str, str],
    core: client.CoreV1Api,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    ns = backend_namespace
    backend = get_backend("k8s")
    handles = []
    with standin_pod(core, ns, test_image.ref, "standin-" + str(os.getpid())) as standin_ip:
        try:
            daemon = backend.start(
                _spec(netprobe_image, tmp_path / "d", "daemon", "restricted", {"MODE": "serve"})
            )
            handles.append(daemon)
            daemon_ip = pod_ip(core, ns, daemon.pod, 120)
            targets = f"{standin_ip}:80 {daemon_ip}:4263"
            results = {}
            for egress in ("restricted", "open"):
                run_dir = tmp_path / egress
                spec = _spec(netprobe_image, run_dir, egress, egress, {"TARGETS": targets})
                handle = backend.start(spec)
                handles.append(handle)
                assert backend.wait(handle, timeout=120) == 0
                results[egress] = "\n".join(backend.logs(handle))
        finally:
            for handle in handles:
                backend.remove(handle)

    assert f"noreach {standin_ip}:80" in results["restricted"], results
    assert f"noreach {daemon_ip}:4263" in results["restricted"], results
    assert f"reach {standin_ip}:80" in results["open"].replace("noreach", "-"), results
    # No ingress to a run, from an open run either.
    assert f"noreach {daemon_ip}:4263" in results["open"], results


def test_a_restricted_run_connecting_at_its_first_instruction_reaches_nothing(
    netprobe_image: str,
    test_image: Any,
    k8s_env: dict[str, str],
    core: client.CoreV1Api,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    """The policy wait is the only thing between a restricted run's first instruction
    and an open network (the policy is enforced some moments after the pod starts):
    runs started together (kube-router programs them one after the other, later for
    each) connect out at once, to the stand-in and to the API server's service, which
    any pod reaches without a policy; an open run started with them proves the probe
    connects when nothing stops it."""
    ns = backend_namespace
    api_service: Any = core.read_namespaced_service("kubernetes", "default")
    backend = get_backend("k8s")
    handles = []
    with standin_pod(core, ns, test_image.ref, "standin-first-" + str(os.getpid())) as standin_ip:
        try:
            targets = f"{standin_ip}:80 {api_service.spec.cluster_ip}:443"
            runs: list[tuple[Egress, Any]] = []
            for index, egress in enumerate(("restricted", "restricted", "restricted", "open")):
                run_id = f"first-{index}"
                run_dir = tmp_path / run_id
                spec = _spec(netprobe_image, run_dir, run_id, egress, {"TARGETS": targets})
                handle = backend.start(spec)
                handles.append(handle)
                runs.append((egress, handle))
            outputs = []
            for egress, handle in runs:
                assert backend.wait(handle, timeout=120) == 0
                outputs.append((egress, "\n".join(backend.logs(handle))))
        finally:
            for handle in handles:
                backend.remove(handle)

    for egress, output in outputs:
        for target in targets.split():
            if egress == "restricted":
                assert f"noreach {target}" in output, output
            else:
                assert f"netprobe: reach {target}" in output, output
