"""The model gateway on the test cluster: `ssebench proxy up --backend k8s` and runs with a model.

The scripted model (`ssebench.runner.scripted`, the product's own code) runs in a
pod of its own, the gateway's provider: pods have no route off the machine, so
the provider is a pod too. Each call costs `CALL_COST` (the script's 100 prompt
and 50 completion tokens at the models file's prices). The gateway is deployed
once for the module with the cluster's admin rights, as a user does; runs use
the backend's own ServiceAccount (its Role), as elsewhere in this tier.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.stream import stream

from ssebench.spec import BackendError, Mount, NetworkPolicy, RunSpec, contract, get_backend, labels

from .conftest import REGISTRY, pod_ip, standin_pod

pytestmark = pytest.mark.k8s

ROOT = Path(__file__).resolve().parents[3]
SSEBENCH = str(ROOT / ".venv/bin/ssebench")
SCRIPTED = ROOT / "packages/ssebench-runner/src/ssebench/runner/scripted.py"
TASK = "pyarchive-path-traversal"
MODEL = "scripted"
KEY_ENV = "SSEBENCH_TEST_PROVIDER_KEY"
PROMPT_TOKENS, COMPLETION_TOKENS = 100, 50
INPUT_PRICE, OUTPUT_PRICE = 1e-4, 2e-4
CALL_COST = PROMPT_TOKENS * INPUT_PRICE + COMPLETION_TOKENS * OUTPUT_PRICE  # 0.02
UPSTREAM_PORT = 8808

# The scripted model needs only UserError of ssebench.spec: the pod gets a stand-in for it.
SERVE = f"""
import sys, time
sys.path.insert(0, "/upstream")
from ssebench.runner.scripted import ScriptedModel, load_script
from pathlib import Path
script = load_script(Path("/upstream/script.json"))
ScriptedModel(script, host="0.0.0.0", port={UPSTREAM_PORT}).start()
print("scripted: serving", flush=True)
time.sleep(10**9)
"""


@dataclass(frozen=True)
class Gateway:
    env: dict[str, str]
    """What `ssebench` needs for the gateway: admin kubeconfig, namespace, models, key."""
    provider_key: str
    upstream_ip: str
    address: str
    """`pod IP:port` of the gateway."""
    pod: str


def _admin_kubeconfig() -> str:
    path = os.environ.get("SSEBENCH_KUBECONFIG")
    if path:
        return path
    out = subprocess.run(
        [str(ROOT / "tests/k8s/cluster/cluster.sh"), "kubeconfig"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 900) -> Any:
    return subprocess.run(
        [SSEBENCH, *args],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _exec(core: client.CoreV1Api, ns: str, pod: str, container: str, command: list[str]) -> str:
    return str(
        stream(
            core.connect_get_namespaced_pod_exec,
            pod,
            ns,
            container=container,
            command=command,
            stdin=False,
            stdout=True,
            stderr=True,
            tty=False,
        )
    )


@pytest.fixture(scope="module")
def gateway(
    core: client.CoreV1Api,
    backend_namespace: str,
    gateway_namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Gateway]:
    """The scripted model's pod (in the runs' namespace), then `ssebench proxy up --backend
    k8s` for the runs' namespace, in the gateway's."""
    ns = backend_namespace
    folder = tmp_path_factory.mktemp("k8s-gateway")
    env = {
        "KUBECONFIG": _admin_kubeconfig(),
        "SSEBENCH_K8S_NAMESPACE": ns,
        "SSEBENCH_K8S_GATEWAY_NAMESPACE": gateway_namespace,
        "SSEBENCH_REGISTRY": REGISTRY,
        "SSEBENCH_MODELS": str(folder / "models.yaml"),
    }
    # The gateway's image serves the scripted model too (it has Python and
    # typing_extensions): pushed here, before the models file can name its address.
    pushed = subprocess.run(
        [
            str(ROOT / ".venv/bin/python"),
            "-c",
            "import docker, sys; from ssebench.spec import find_home;"
            "from ssebench.backends.docker._gateway_publish import publish_gateway;"
            "print(publish_gateway(docker.from_env(), find_home(), lambda line: None))",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    image = pushed.stdout.strip().splitlines()[-1]
    reply = {"content": "scripted", "prompt_tokens": 100, "completion_tokens": 50}
    core.create_namespaced_config_map(
        ns,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="upstream"),
            data={
                "scripted.py": SCRIPTED.read_text(),
                "spec.py": "class UserError(Exception):\n    pass\n",
                "script.json": json.dumps({"replies": [reply], "cycle": True}),
            },
        ),
    )
    items = {
        "scripted.py": "ssebench/runner/scripted.py",
        "spec.py": "ssebench/spec/__init__.py",
        "script.json": "script.json",
    }
    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="upstream", labels={"app": "upstream"}),
            spec=client.V1PodSpec(
                containers=[
                    client.V1Container(
                        name="model",
                        image=image,
                        command=["python3.11", "-c", SERVE],
                        volume_mounts=[client.V1VolumeMount(name="code", mount_path="/upstream")],
                    )
                ],
                volumes=[
                    client.V1Volume(
                        name="code",
                        config_map=client.V1ConfigMapVolumeSource(
                            name="upstream",
                            items=[client.V1KeyToPath(key=k, path=p) for k, p in items.items()],
                        ),
                    )
                ],
                restart_policy="Never",
                termination_grace_period_seconds=0,
                automount_service_account_token=False,
            ),
        ),
    )
    upstream_ip = pod_ip(core, ns, "upstream", 300)
    (folder / "models.yaml").write_text(
        f"budget: 1.0\nreservation: {CALL_COST}\nmodels:\n  {MODEL}:\n    litellm:\n"
        f"      model: openai/{MODEL}\n"
        f"      api_base: http://{upstream_ip}:{UPSTREAM_PORT}/v1\n"
        f"      input_cost_per_token: {INPUT_PRICE}\n"
        f"      output_cost_per_token: {OUTPUT_PRICE}\n"
        f"    key_env: {KEY_ENV}\n"
    )
    provider_key = "sk-provider-" + secrets.token_hex(16)
    env[KEY_ENV] = provider_key
    up = _cli(["proxy", "up", "--backend", "k8s", "--json"], env, folder)
    assert up.returncode == 0, up.stderr[-3000:]
    assert provider_key not in up.stdout + up.stderr
    status = json.loads(up.stdout)
    assert status["state"] == "running" and status["models"] == [MODEL], status
    pods: Any = core.list_namespaced_pod(
        gateway_namespace, label_selector="ssebench.gateway=ssebench-gateway"
    )
    try:
        yield Gateway(
            env=env,
            provider_key=provider_key,
            upstream_ip=upstream_ip,
            address=status["address"],
            pod=pods.items[0].metadata.name,
        )
    finally:
        down = _cli(["proxy", "down", "--backend", "k8s"], env, folder)
        assert down.returncode == 0, down.stderr
        left: Any = core.list_namespaced_pod(gateway_namespace)
        assert all(pod.metadata.deletion_timestamp for pod in left.items), left
        core.delete_namespaced_pod("upstream", ns, grace_period_seconds=0)
        core.delete_namespaced_config_map("upstream", ns)


@pytest.fixture(scope="module")
def model_caller_images(kube: client.ApiClient) -> str:
    """The model-caller agent's image for the task, in the cluster's registry."""
    env = {
        **os.environ,
        "SSEBENCH_REGISTRY": REGISTRY,
        "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents"),
    }
    subprocess.run(
        [SSEBENCH, "images", "push", "--agents", "model-caller", "--tasks", TASK, "--force"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return REGISTRY


def test_proxy_up_is_kept_when_nothing_changed_and_status_shows_it(
    gateway: Gateway, tmp_path: Path
) -> None:
    again = _cli(["proxy", "up", "--backend", "k8s", "--json"], gateway.env, tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "already runs this configuration" in again.stderr
    assert json.loads(again.stdout)["address"] == gateway.address
    status = _cli(["proxy", "status", "--backend", "k8s", "--json"], gateway.env, tmp_path)
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert shown["state"] == "running" and shown["models"] == [MODEL]
    assert shown["address"] == gateway.address


def test_the_provider_key_is_in_no_object_env_or_log_of_the_cluster(
    gateway: Gateway, kube: client.ApiClient, gateway_namespace: str
) -> None:
    ns = gateway_namespace
    apps, core = client.AppsV1Api(kube), client.CoreV1Api(kube)
    deployment = kube.sanitize_for_serialization(
        apps.read_namespaced_deployment("ssebench-gateway", ns)
    )
    pod = kube.sanitize_for_serialization(core.read_namespaced_pod(gateway.pod, ns))
    for found in (deployment, pod):
        text = json.dumps(found)
        assert gateway.provider_key not in text
        assert "sk-master-" not in text
    for container in ("store", "proxy", "admin"):
        log = core.read_namespaced_pod_log(gateway.pod, ns, container=container)
        assert gateway.provider_key not in log
    # In the proxy's process: not on its command line or in its environment.
    seen = _exec(
        core, ns, gateway.pod, "proxy", ["sh", "-c", "cat /proc/1/cmdline /proc/1/environ"]
    )
    assert gateway.provider_key not in seen and "sk-master-" not in seen
    # The admin container, which the runner's requests reach, has no configuration at all.
    listed = _exec(core, ns, gateway.pod, "admin", ["sh", "-c", "ls /run; cat /proc/1/environ"])
    assert "ssebench-admin" in listed and "ssebench-gateway" not in listed.split()
    assert gateway.provider_key not in listed and "sk-master-" not in listed
    # Only in the Secret, which the proxy reads as a file.
    secret: Any = core.read_namespaced_secret("ssebench-gateway", ns)
    assert gateway.provider_key in base64.b64decode(secret.data["config.yaml"]).decode()


def _spec(image: str, run_dir: Path, run_id: str, env: dict[str, str]) -> RunSpec:
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
        network=NetworkPolicy(egress="restricted", model_proxy=True),
    )


def test_a_restricted_model_run_reaches_the_gateway_and_not_the_upstream_or_a_stand_in(
    gateway: Gateway,
    netprobe_image: str,
    test_image: Any,
    k8s_env: dict[str, str],
    core: client.CoreV1Api,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    ns = backend_namespace
    backend = get_backend("k8s")
    handle = None
    with standin_pod(core, ns, test_image.ref, "standin-gw-" + str(os.getpid()), 300) as standin_ip:
        try:
            targets = f"{gateway.address} {gateway.upstream_ip}:{UPSTREAM_PORT} {standin_ip}:80"
            # The key store needs a key of this run to bind: a gateway opened for it.
            opened = backend.gateway(_models(gateway))
            opened.open_key("probe-gw", [MODEL], 1.0)
            spec = _spec(netprobe_image, tmp_path / "r", "probe-gw", {"TARGETS": targets})
            handle = backend.start(spec)
            assert backend.wait(handle, timeout=180) == 0
            said = "\n".join(backend.logs(handle))
        finally:
            if handle is not None:
                backend.remove(handle)
            backend.gateway(_models(gateway)).close_key("probe-gw")
    assert f"netprobe: reach {gateway.address}" in said, said
    assert f"noreach {gateway.upstream_ip}:{UPSTREAM_PORT}" in said, said
    assert f"noreach {standin_ip}:80" in said, said


def _models(gateway: Gateway) -> Any:
    from ssebench.spec import load_models

    return load_models(Path(gateway.env["SSEBENCH_MODELS"]))


def test_a_model_run_through_the_in_cluster_gateway_records_spend_and_its_key_is_revoked(
    gateway: Gateway,
    model_caller_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns = backend_namespace
    core, batch = client.CoreV1Api(kube), client.BatchV1Api(kube)
    run_id = "k8s-gw-" + secrets.token_hex(3)
    # The provider key is the cluster's: the runner's environment has none (the Docker
    # gateway tier's session puts it in this process's environment).
    monkeypatch.delenv(KEY_ENV, raising=False)
    env = {
        **k8s_env,
        "SSEBENCH_MODELS": gateway.env["SSEBENCH_MODELS"],
        "SSEBENCH_AGENT_PATH": str(ROOT / "tests/agents"),
    }
    done = _cli(
        [
            *("run", "--task", TASK, "--agent", "model-caller", "--run-id", run_id),
            *("--model", MODEL, "--budget", "0.05", "--timeout", "300", "--json"),
            *("--backend", "k8s", "--prebuilt", "--keep-container"),
            *("--local", str(ROOT / "datasets/demo")),
        ],
        env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    run_dir = tmp_path / "results" / TASK / MODEL / "model-caller" / run_id
    try:
        # Graded as usual (the agent changed nothing), then the outcome.
        assert summary["patch_result"]["status"] == "failed"
        assert summary["outcome"] == "budget_exceeded"
        # Admitted after spending 0 and 0.02 of 0.05; what is left (0.01) pays for less
        # than the third call's prompt, which is refused.
        assert summary["spend"] == pytest.approx(2 * CALL_COST)
        assert summary["usage"] == {
            "calls": 2,
            "prompt_tokens": 2 * PROMPT_TOKENS,
            "completion_tokens": 2 * COMPLETION_TOKENS,
            "refused_for_budget": 1,
            "refused_for_concurrency": 0,
            "provider_errors": [],
            "provider_down": False,
        }
        agent_log = (run_dir / "agent.log").read_text()
        assert "call 3: 401" in agent_log
        assert "the run's budget of $0.05 is used up" in agent_log

        # The kept run's objects: its key is only in its Secret, never in the Job or pod.
        selector = f"{labels.RUN_ID}={run_id}"
        pod: Any = core.list_namespaced_pod(ns, label_selector=selector).items[0]
        job: Any = batch.list_namespaced_job(ns, label_selector=selector).items[0]
        secret: Any = core.read_namespaced_secret(job.metadata.name, ns)
        key = base64.b64decode(secret.data["env.SSE_API_KEY"]).decode()
        assert key.startswith("sk-ssebench-")
        base_url = base64.b64decode(secret.data["env.SSE_BASE_URL"]).decode()
        assert base_url == f"http://{gateway.address}"
        for found in (pod, job):
            text = json.dumps(kube.sanitize_for_serialization(found))
            assert key not in text and gateway.provider_key not in text
            assert "sk-ssebench-" not in text
        # The agent's container ("run") holds the key; the checker ("task") never does.
        containers = {c.name: c for c in pod.spec.containers}
        assert "SSE_API_KEY" not in {e.name for e in containers["task"].env}
        run_env = {e.name: e for e in containers["run"].env}
        assert run_env["SSE_API_KEY"].value is None
        assert run_env["SSE_API_KEY"].value_from.secret_key_ref.name == job.metadata.name
        for path in run_dir.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                assert key.encode() not in data and gateway.provider_key.encode() not in data

        # Revoked: from the run's own pod (its keeper shares the pod's address, to which
        # the key is bound), the key that worked there is now refused.
        host, port = gateway.address.split(":")
        body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
        request = (
            f"POST /v1/chat/completions HTTP/1.0\\r\\nHost: {host}\\r\\n"
            f"Authorization: Bearer {key}\\r\\nContent-Type: application/json\\r\\n"
            f"Content-Length: {len(body)}\\r\\n\\r\\n{body}"
        )
        script = f"exec 3<>/dev/tcp/{host}/{port}; printf '{request}' >&3; timeout 20 cat <&3"
        answer = _exec(core, ns, pod.metadata.name, "keeper", ["bash", "-c", script])
        assert answer.startswith("HTTP/1.1 401") or answer.startswith("HTTP/1.0 401"), answer
        assert "not valid" in answer, answer
    finally:
        get_backend("k8s").remove(
            next(r for r in get_backend("k8s").list_runs({labels.RUN_ID: run_id})).handle
        )


def _attempts(ns: str, pod: str) -> dict[tuple[str, str], tuple[str, str, Any]]:
    """Every (resource, verb) the backend's Roles hold, tried against the gateway's
    namespace: its pod, its Secret and its objects, as (method, path, body)."""
    base = f"/api/v1/namespaces/{ns}"
    pods, secrets_ = f"{base}/pods", f"{base}/secrets"
    jobs = f"/apis/batch/v1/namespaces/{ns}/jobs"
    policies = f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"
    # A pod of the runner's own that mounts the gateway's Secret: the keys, by another way.
    thief = {
        "metadata": {"name": "thief"},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "volumeMounts": [{"name": "k", "mountPath": "/k"}]}
            ],
            "volumes": [{"name": "k", "secret": {"secretName": "ssebench-gateway"}}],
        },
    }
    job = {"metadata": {"name": "thief"}, "spec": {"template": thief}}
    patch = {"metadata": {"labels": {"stolen": "1"}}}
    exec_query = "?container=proxy&command=cat&command=/run/ssebench-gateway/config.yaml&stdout=1"
    return {
        ("pods", "get"): ("GET", f"{pods}/{pod}", None),
        ("pods", "list"): ("GET", pods, None),
        ("pods", "watch"): ("GET", f"{pods}?watch=1&timeoutSeconds=1", None),
        ("pods", "create"): ("POST", pods, thief),
        ("pods", "patch"): ("PATCH", f"{pods}/{pod}", patch),
        ("pods", "delete"): ("DELETE", f"{pods}/{pod}", None),
        ("pods/log", "get"): ("GET", f"{pods}/{pod}/log?container=proxy", None),
        ("pods/exec", "get"): ("GET", f"{pods}/{pod}/exec{exec_query}", None),
        ("pods/exec", "create"): ("POST", f"{pods}/{pod}/exec{exec_query}", None),
        ("pods/portforward", "get"): ("GET", f"{pods}/{pod}/portforward?ports=4000", None),
        ("pods/portforward", "create"): ("POST", f"{pods}/{pod}/portforward?ports=4000", None),
        ("secrets", "get"): ("GET", f"{secrets_}/ssebench-gateway", None),
        ("secrets", "create"): ("POST", secrets_, {"metadata": {"name": "x"}, "data": {}}),
        ("secrets", "delete"): ("DELETE", f"{secrets_}/ssebench-gateway", None),
        ("jobs", "create"): ("POST", jobs, job),
        ("jobs", "patch"): ("PATCH", f"{jobs}/ssebench-gateway", patch),
        ("jobs", "delete"): ("DELETE", f"{jobs}/ssebench-gateway", None),
        ("networkpolicies", "create"): ("POST", policies, {"metadata": {"name": "x"}, "spec": {}}),
        ("networkpolicies", "delete"): ("DELETE", f"{policies}/ssebench-gateway", None),
        # The proxy's own port, by the admin Service under another name, or by the pod.
        ("services/proxy", "get"): (
            "GET",
            f"{base}/services/ssebench-gateway-admin:4000/proxy/",
            None,
        ),
        ("services/proxy", "create"): (
            "POST",
            f"{base}/services/http:ssebench-gateway-admin:admin/proxy/keys",
            {},
        ),
    }


def _roles_verbs() -> set[tuple[str, str]]:
    from .conftest import GATEWAY_ROLE, ROLE

    held = set()
    for path in (ROLE, GATEWAY_ROLE):
        for rule in yaml.safe_load(path.read_text())["rules"]:
            held |= {(res, verb) for res in rule["resources"] for verb in rule["verbs"]}
    return held


def test_the_backends_identity_does_nothing_to_the_gateways_pod_or_secret_but_open_and_revoke_keys(
    gateway: Gateway,
    role_kubeconfig: Path,
    backend_namespace: str,
    gateway_namespace: str,
    core: client.CoreV1Api,
) -> None:
    """As the backend's ServiceAccount: every verb its Roles hold, tried on the gateway's
    pod, Secret and objects, is refused; keys are opened, used and revoked through the
    admin route from this process, which is outside the pod network (the API server
    carries the calls)."""
    from kubernetes import config

    from ssebench.backends.k8s import _rest as rest
    from ssebench.backends.k8s._gateway import K8sGateway, admin_call

    api = config.new_client_from_config(config_file=str(role_kubeconfig))  # type: ignore[no-untyped-call]
    attempts = _attempts(gateway_namespace, gateway.pod)
    assert _roles_verbs() <= set(attempts), "a verb of the Roles is not tried here"
    answered = {}
    for (resource, verb), (method, path, body) in attempts.items():
        try:
            rest.request(api, method, path, body=body, timeout=20).drain_conn()
            answered[(resource, verb)] = 200
        except client.ApiException as exc:
            answered[(resource, verb)] = exc.status
    assert answered == dict.fromkeys(attempts, 403), answered
    # Still there, untouched.
    found: Any = core.read_namespaced_pod(gateway.pod, gateway_namespace)
    assert "stolen" not in (found.metadata.labels or {})
    core.read_namespaced_secret("ssebench-gateway", gateway_namespace)

    # The admin route wants its token: none, or another, is refused by the gateway itself.
    for token in ("", "sk-" + secrets.token_urlsafe(32)):
        with pytest.raises(BackendError, match="refused \\(401\\)"):
            admin_call(api, gateway_namespace, token, "GET", "/info")

    opened = K8sGateway.find(api, backend_namespace, gateway_namespace)
    assert f"{opened.address}:4000" == gateway.address and opened.models == [MODEL]
    key = opened.open_key("from-outside", [MODEL], 1.0)
    assert key.startswith("sk-ssebench-")

    def call() -> int:
        request = urllib.request.Request(
            f"http://{gateway.address}/v1/chat/completions",
            data=json.dumps(
                {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
            ).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    assert call() == 200
    report = opened.close_key("from-outside")
    assert report is not None and report.usage.calls == 1
    assert report.spend == pytest.approx(CALL_COST)
    assert call() == 401
