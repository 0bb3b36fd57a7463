"""The cluster objects of one run: its Job (and pod template), Secret and NetworkPolicy.

Labels Kubernetes accepts stay labels; values it refuses (the run directory's
path, say) go into annotations under the same key, so `list_runs` reads both.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from ssebench.backends.k8s._limits import requirements
from ssebench.spec import BackendError, RunSpec

BACKEND_LABEL: Final = "ssebench.backend"
"""On every object of a run: `k8s`; `list_runs` selects by it."""

NAME_LABEL: Final = "ssebench.name"
"""The run's Job name, on the pod too: the NetworkPolicy selects the pod by it."""

NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
"""The label the API server puts on every namespace: its name (a namespaceSelector by name)."""

KEEP_LABEL: Final = "ssebench.keep"

RUN_CONTAINER: Final = "run"
"""The container of the image: the entrypoint is its PID 1."""

KEEPER_CONTAINER: Final = "keeper"
"""Holds the results' storage after the run container ended, until `collect_results`."""

POLICY_WAIT_CONTAINER: Final = "policy-wait"
"""A restricted run's first init container: waits until its NetworkPolicy is in force."""

AGENT_TIMEOUT_LABEL: Final = "ssebench.agent-timeout"
"""On a run's pod: its TIMEOUT; the pod's agent container is watched by the backend."""

KEEP_ROOT: Final = "/ssebench-keep"
"""Where the keeper mounts the results (`results/`), the archive (`archive/`), `control/`."""

CONTROL_DIR: Final = "/run/ssebench-control"
"""In the run container (read-only): holds `kill` once `stop`'s grace is over."""

KILL_FILE: Final = "kill"
PULL_POLICY: Final = "Always"
"""A published tag moves (`images push --force`, a new daemon under the same agent
version): at each start the kubelet asks the registry which digest the tag names
(cached layers stay cached) instead of running what it pulled under the tag before."""

PROBE_PERIOD: Final = 2
"""Seconds between two looks of the kubelet for the kill file."""
PROBE_FAILURES: Final = 3
"""Failed looks in a row that end the container."""

POLICY_WAIT: Final = """
# A NetworkPolicy is enforced some time after its pod starts (the network plugin
# programs it on the pod's event): until then a restricted run could reach
# anything. The canary is the API server's service, which pods reach unless a
# policy denies it. It is in force once a connection to it is refused or stays
# unanswered for a second: kube-router REJECTs, but its ICMP answer to a connection
# to the service's (DNAT'ed) address is lost, so the pod sees silence; on the test
# cluster the policy was in force 0.1 s after the container started, and a
# connection to the service took 0.4 ms (p50), 5 ms (p99), 0.19 s at most while
# the node ran at load 6 on 2 cores. Any other failure proves nothing and is tried
# again. Fails closed after 120 s.
canary=/dev/tcp/$KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT
end=$((SECONDS + 120))
while [ "$SECONDS" -lt "$end" ]; do
    why=$(timeout 1 bash -c "exec 3<>$canary" 2>&1)
    case $? in
        0) ;;
        124) exit 0 ;;
        *) case $why in *"Connection refused"*) exit 0 ;; esac ;;
    esac
    sleep 0.05
done
echo "ssebench: the run's NetworkPolicy was not in force after 120 s" >&2
exit 1
"""
"""The first container of a restricted run's pod: waits until its egress is cut."""

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_KEY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def is_label(key: str, value: str) -> bool:
    """Whether Kubernetes takes this pair as a label (unprefixed key, short plain value)."""
    return bool(_LABEL_KEY.match(key)) and len(value) <= 63 and bool(_LABEL_VALUE.match(value))


def split_labels(wanted: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) of a run's label set."""
    as_labels = {k: v for k, v in wanted.items() if is_label(k, v)}
    return as_labels, {k: v for k, v in wanted.items() if k not in as_labels}


def job_name(run_id: str) -> str:
    """A DNS-1123 name for a run's Job: `ssebench-<run id, cleaned>-<random>`."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")[:40].strip("-")
    return f"ssebench-{cleaned or 'run'}-{secrets.token_hex(3)}"


def secret_data(spec: RunSpec) -> tuple[dict[str, str], dict[str, str]]:
    """The Secret's string data and the artifacts' keys by target.

    Raises:
        BackendError: an artifact cannot be read on this host.
    """
    data = {f"env.{name}": value for name, value in spec.env.items()}
    keys: dict[str, str] = {}
    for index, artifact in enumerate(spec.artifacts):
        try:
            content = Path(artifact.source).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise BackendError(f"cannot read the run's artifact {artifact.source}: {exc}") from exc
        keys[artifact.target] = f"artifact.{index}"
        data[f"artifact.{index}"] = content
    return data, keys


def owner(job: Any) -> list[client.V1OwnerReference]:
    """An owner reference to the run's Job: deleting the Job removes what it owns."""
    return [
        client.V1OwnerReference(
            api_version="batch/v1",
            kind="Job",
            name=job.metadata.name,
            uid=job.metadata.uid,
            block_owner_deletion=False,
        )
    ]


def network_policy(name: str, own: dict[str, str], spec: RunSpec) -> client.V1NetworkPolicy:
    """No ingress; egress everything when open, else the model gateway's pods (if the run
    uses a model: by its namespace's and its pods' selectors, on its port) and nothing else."""
    if spec.network.egress == "open":
        egress = [client.V1NetworkPolicyEgressRule()]
    elif spec.network.model_proxy:
        from ssebench.backends.k8s._api import gateway_namespace
        from ssebench.backends.k8s._gateway import GATEWAY_LABEL, GATEWAY_NAME, GATEWAY_PORT

        gateway = client.V1NetworkPolicyPeer(
            namespace_selector=client.V1LabelSelector(
                match_labels={NAMESPACE_NAME_LABEL: gateway_namespace()}
            ),
            pod_selector=client.V1LabelSelector(match_labels={GATEWAY_LABEL: GATEWAY_NAME}),
        )
        egress = [
            client.V1NetworkPolicyEgressRule(
                to=[gateway],
                ports=[client.V1NetworkPolicyPort(protocol="TCP", port=GATEWAY_PORT)],
            )
        ]
    else:
        egress = []
    return client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name=name, labels=own),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(match_labels={NAME_LABEL: name}),
            policy_types=["Ingress", "Egress"],
            ingress=[],
            egress=egress,
        ),
    )


def _volume(name: str) -> client.V1Volume:
    return client.V1Volume(name=name, empty_dir=client.V1EmptyDirVolumeSource())


def job(
    name: str,
    spec: RunSpec,
    own: dict[str, str],
    annotations: dict[str, str],
    artifacts: dict[str, str],
) -> client.V1Job:
    """The run's Job, created suspended (its Secret and policy are made next, owned by it)."""
    env = [
        client.V1EnvVar(
            name=key,
            value_from=client.V1EnvVarSource(
                secret_key_ref=client.V1SecretKeySelector(name=name, key=f"env.{key}")
            ),
        )
        for key in spec.env
    ]
    run_mounts = [
        client.V1VolumeMount(name="results", mount_path=spec.results.target),
        client.V1VolumeMount(name="archive", mount_path=spec.archive.target),
        client.V1VolumeMount(name="control", mount_path=CONTROL_DIR, read_only=True),
        *(
            client.V1VolumeMount(name="artifacts", mount_path=target, sub_path=key, read_only=True)
            for target, key in artifacts.items()
        ),
    ]
    run = client.V1Container(
        name=RUN_CONTAINER,
        image=spec.image,
        image_pull_policy=PULL_POLICY,
        env=env,
        volume_mounts=run_mounts,
        security_context=client.V1SecurityContext(allow_privilege_escalation=False),
        resources=requirements(spec.resources),
        # The kubelet's only way to end one container of a pod: once `stop`'s grace is
        # over, `stop` writes the kill file and the failed probe kills this container
        # (restartPolicy Never: it stays ended), while the keeper keeps the results.
        # Three failures in a row, each given 10 s: on a loaded node one slow exec must
        # not kill a run nobody stopped (it did in the k8s tier at load 20).
        liveness_probe=client.V1Probe(
            _exec=client.V1ExecAction(
                command=["/bin/sh", "-c", f"! test -e {CONTROL_DIR}/{KILL_FILE}"]
            ),
            period_seconds=PROBE_PERIOD,
            failure_threshold=PROBE_FAILURES,
            timeout_seconds=10,
            termination_grace_period_seconds=1,
        ),
    )
    keeper = client.V1Container(
        name=KEEPER_CONTAINER,
        image=spec.image,
        image_pull_policy=PULL_POLICY,
        command=["sleep", "infinity"],
        volume_mounts=[
            client.V1VolumeMount(name="results", mount_path=f"{KEEP_ROOT}/results"),
            client.V1VolumeMount(name="archive", mount_path=f"{KEEP_ROOT}/archive"),
            client.V1VolumeMount(name="control", mount_path=f"{KEEP_ROOT}/control"),
        ],
        security_context=client.V1SecurityContext(
            allow_privilege_escalation=False,
            run_as_user=0,
            capabilities=client.V1Capabilities(drop=["ALL"], add=["DAC_READ_SEARCH"]),
        ),
        resources=client.V1ResourceRequirements(requests={"cpu": "10m", "memory": "16Mi"}),
    )
    init = []
    if spec.network.egress == "restricted":
        init.append(
            client.V1Container(
                name=POLICY_WAIT_CONTAINER,
                image=spec.image,
                image_pull_policy=PULL_POLICY,
                command=["/bin/bash", "-c", POLICY_WAIT],
                security_context=client.V1SecurityContext(
                    allow_privilege_escalation=False,
                    run_as_user=65534,
                    capabilities=client.V1Capabilities(drop=["ALL"]),
                ),
            )
        )
    volumes = [_volume("results"), _volume("archive"), _volume("control")]
    if artifacts:
        volumes.append(
            client.V1Volume(
                name="artifacts",
                secret=client.V1SecretVolumeSource(
                    secret_name=name,
                    items=[client.V1KeyToPath(key=key, path=key) for key in artifacts.values()],
                    default_mode=0o444,
                ),
            )
        )
    pod_meta = client.V1ObjectMeta(labels={**own, NAME_LABEL: name}, annotations=annotations)
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name, labels=own, annotations=annotations),
        spec=client.V1JobSpec(
            suspend=True,
            backoff_limit=0,
            completions=1,
            parallelism=1,
            template=client.V1PodTemplateSpec(
                metadata=pod_meta,
                spec=client.V1PodSpec(
                    init_containers=init or None,
                    containers=[run, keeper],
                    volumes=volumes,
                    restart_policy="Never",
                    # Deleting the pod is cleanup, never stop: results are out by then.
                    termination_grace_period_seconds=1,
                    automount_service_account_token=False,
                    enable_service_links=False,
                    share_process_namespace=False,
                ),
            ),
        ),
    )
