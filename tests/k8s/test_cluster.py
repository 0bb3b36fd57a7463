"""The Kubernetes paths SSEBench relies on, against a real one-node cluster.

Jobs, logs, exec (with exit codes and tar streams), port-forward, emptyDir,
Secrets and NetworkPolicy objects go through the real API server, kubelet and
containerd that `tests/k8s/cluster/cluster.sh up` starts.

NetworkPolicies are enforced by kube-router's firewall (v2.1.0, built from the Go
module proxy): a denied connection fails, an allowed one still works. What keeps
pods in regardless of policies is the node's own network setup, tested below.
No test sends traffic off this machine.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import secrets
import socket
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client
from kubernetes.stream import portforward

from .conftest import BuiltImage, Exec, RunPod, wait_for_phase

pytestmark = pytest.mark.k8s

POD_GATEWAY = "10.244.0.1"  # the pod bridge's address on the host (cluster.sh)
API_SERVICE = ("10.96.0.1", 443)  # the `kubernetes` service: the API server


def test_a_job_of_a_locally_built_image_runs_to_completion_and_its_logs_come_through_the_api(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str, test_image: BuiltImage
) -> None:
    job = client.V1Job(
        metadata=client.V1ObjectMeta(name="hello"),
        spec=client.V1JobSpec(
            backoff_limit=0,
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    automount_service_account_token=False,
                    containers=[client.V1Container(name="main", image=test_image.ref)],
                )
            ),
        ),
    )
    batch.create_namespaced_job(namespace, job)
    deadline = time.monotonic() + 120
    while True:
        status = batch.read_namespaced_job_status("hello", namespace).status
        if status.succeeded or status.failed:
            break
        assert time.monotonic() < deadline, f"the job did not finish: {status}"
        time.sleep(0.5)
    assert status.succeeded == 1, status
    (pod,) = core.list_namespaced_pod(namespace, label_selector="job-name=hello").items
    logs = core.read_namespaced_pod_log(pod.metadata.name, namespace)
    assert logs.strip() == test_image.marker


CONTAINERD = ("ctr", "--address", "/run/benchk8s/containerd.sock", "--namespace", "k8s.io")
PAUSE_IMAGE = "127.0.0.1:5123/benchk8s/pause:1"  # cluster.sh


def test_a_pod_starts_after_the_node_deleted_its_pause_image(run_pod: RunPod) -> None:
    """On a nearly full disk the kubelet deletes unused images, the pause image among
    them (containerd 1.6 does not pin it): every pod after that waited for a sandbox
    image nothing could pull (CI, when its disk ran low). The registry holds it too."""
    subprocess.run([*CONTAINERD, "images", "rm", PAUSE_IMAGE], check=True, capture_output=True)
    listed = subprocess.run([*CONTAINERD, "images", "ls", "-q"], check=True, capture_output=True)
    assert PAUSE_IMAGE not in listed.stdout.decode().split()
    run_pod("after-pause-gc")


def test_exec_returns_stdout_stderr_and_the_exit_code(run_pod: RunPod, pod_exec: Exec) -> None:
    pod = run_pod()
    ok = pod_exec(pod, ["sh", "-c", "echo out; echo err >&2"])
    assert (ok.code, ok.stdout, ok.stderr) == (0, b"out\n", b"err\n")
    failed = pod_exec(pod, ["sh", "-c", "echo partial; exit 7"])
    assert (failed.code, failed.stdout) == (7, b"partial\n")


def test_a_tar_stream_of_a_directory_comes_back_intact_through_exec(
    run_pod: RunPod, pod_exec: Exec
) -> None:
    pod = run_pod()
    # Text, binary with every byte value, an empty file, a nested file, a symlink.
    make = (
        "cd /data/tree && printf 'line one\\nline two\\n' > a.txt"
        " && head -c 300000 /dev/urandom > blob.bin && : > empty"
        " && echo nested > sub/n.txt && ln -s a.txt link"
        " && sha256sum a.txt blob.bin empty sub/n.txt"
    )
    made = pod_exec(pod, ["sh", "-c", make])
    assert made.code == 0, made.stderr
    expected = dict(reversed(line.split()) for line in made.stdout.decode().splitlines())

    result = pod_exec(pod, ["tar", "-C", "/data", "-cf", "-", "tree"])
    assert result.code == 0, result.stderr
    with tarfile.open(fileobj=io.BytesIO(result.stdout)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        got = {
            name.removeprefix("tree/"): hashlib.sha256(tar.extractfile(m).read()).hexdigest()  # type: ignore[union-attr]
            for name, m in members.items()
            if m.isfile()
        }
        assert got == expected
        assert members["tree/link"].issym() and members["tree/link"].linkname == "a.txt"
        assert members["tree/sub"].isdir()


def test_port_forward_reaches_an_http_server_in_the_pod(
    core: client.CoreV1Api,
    namespace: str,
    run_pod: RunPod,
    test_image: BuiltImage,
    pod_exec: Exec,
) -> None:
    server = client.V1Container(
        name="web", image=test_image.ref, command=["httpd", "-f", "-p", "8080", "-h", "/srv/www"]
    )
    pod = run_pod("web", containers=[server])
    # httpd is up once something answers inside the pod.
    deadline = time.monotonic() + 30
    while pod_exec(pod, ["wget", "-q", "-O", "-", "http://127.0.0.1:8080/"]).code != 0:
        assert time.monotonic() < deadline, "httpd did not start in the pod"
        time.sleep(0.3)

    pf = portforward(core.connect_get_namespaced_pod_portforward, pod, namespace, ports="8080")
    try:
        sock = pf.socket(8080)
        sock.setblocking(True)
        sock.sendall(b"GET /index.html HTTP/1.0\r\nHost: pod\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        sock.close()
        assert pf.error(8080) is None
    finally:
        pf.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].split()[1] == b"200", head
    assert body == b"hello from the pod\n"


def test_two_containers_of_one_pod_share_an_empty_dir(
    run_pod: RunPod, pod_exec: Exec, test_image: BuiltImage
) -> None:
    mount = [client.V1VolumeMount(name="shared", mount_path="/shared")]
    writer = client.V1Container(
        name="writer",
        image=test_image.ref,
        command=["sh", "-c", "echo from-writer > /shared/note; sleep infinity"],
        volume_mounts=mount,
    )
    reader = client.V1Container(
        name="reader", image=test_image.ref, command=["sleep", "infinity"], volume_mounts=mount
    )
    pod = run_pod(
        "pair",
        containers=[writer, reader],
        volumes=[client.V1Volume(name="shared", empty_dir=client.V1EmptyDirVolumeSource())],
    )
    deadline = time.monotonic() + 30
    while (seen := pod_exec(pod, ["cat", "/shared/note"], container="reader")).code != 0:
        assert time.monotonic() < deadline, seen.stderr
        time.sleep(0.3)
    assert seen.stdout == b"from-writer\n"
    wrote = pod_exec(pod, ["sh", "-c", "echo back > /shared/reply"], container="reader")
    assert wrote.code == 0
    assert pod_exec(pod, ["cat", "/shared/reply"], container="writer").stdout == b"back\n"


def test_a_secret_is_mounted_as_a_file_and_exposed_as_environment(
    core: client.CoreV1Api,
    namespace: str,
    run_pod: RunPod,
    pod_exec: Exec,
    test_image: BuiltImage,
) -> None:
    value = "sk-" + secrets.token_hex(12)
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="creds"), string_data={"key": value}),
    )
    container = client.V1Container(
        name="main",
        image=test_image.ref,
        command=["sleep", "infinity"],
        env=[
            client.V1EnvVar(
                name="MODEL_KEY",
                value_from=client.V1EnvVarSource(
                    secret_key_ref=client.V1SecretKeySelector(name="creds", key="key")
                ),
            )
        ],
        volume_mounts=[client.V1VolumeMount(name="creds", mount_path="/run/creds", read_only=True)],
    )
    pod = run_pod(
        containers=[container],
        volumes=[
            client.V1Volume(name="creds", secret=client.V1SecretVolumeSource(secret_name="creds"))
        ],
    )
    assert pod_exec(pod, ["sh", "-c", 'printf %s "$MODEL_KEY"']).stdout == value.encode()
    assert pod_exec(pod, ["cat", "/run/creds/key"]).stdout == value.encode()


def test_the_api_server_accepts_and_stores_a_network_policy(
    networking: client.NetworkingV1Api, namespace: str
) -> None:
    """Validated and stored by the real API server (enforcement: the tests below)."""
    policy = client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name="deny-ingress"),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(match_labels={"app": "probe"}),
            policy_types=["Ingress", "Egress"],
            egress=[
                client.V1NetworkPolicyEgressRule(
                    to=[
                        client.V1NetworkPolicyPeer(ip_block=client.V1IPBlock(cidr="10.244.0.1/32"))
                    ],
                    ports=[client.V1NetworkPolicyPort(protocol="TCP", port=6443)],
                )
            ],
        ),
    )
    networking.create_namespaced_network_policy(namespace, policy)
    stored = networking.read_namespaced_network_policy("deny-ingress", namespace)
    assert stored.spec.policy_types == ["Ingress", "Egress"]
    assert stored.spec.ingress is None
    assert stored.spec.egress[0].ports[0].port == 6443

    bad = client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name="bad"),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(),
            ingress=[
                client.V1NetworkPolicyIngressRule(
                    _from=[client.V1NetworkPolicyPeer(ip_block=client.V1IPBlock(cidr="not-a-cidr"))]
                )
            ],
        ),
    )
    with pytest.raises(client.ApiException) as refused:
        networking.create_namespaced_network_policy(namespace, bad)
    assert refused.value.status == 422


def _host_address(core: client.CoreV1Api) -> str:
    """This machine's primary address: the node's InternalIP."""
    (node,) = core.list_node().items
    return next(a.address for a in node.status.addresses if a.type == "InternalIP")


@pytest.fixture
def host_server() -> Iterator[int]:
    """An HTTP server of the test's own on the host, on all addresses, outside the cluster."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _connects(pod_exec: Exec, pod: str, host: str, port: int) -> tuple[bool, str]:
    """Open a TCP connection from the pod and close it at once (busybox nc has no -z)."""
    r = pod_exec(pod, ["sh", "-c", f"nc -w 3 {host} {port} </dev/null"])
    return r.code == 0, (r.stdout + r.stderr).decode(errors="replace")


def test_a_pod_cannot_open_a_connection_to_a_server_on_the_host(
    core: client.CoreV1Api, run_pod: RunPod, pod_exec: Exec, host_server: int
) -> None:
    host = _host_address(core)
    pod = run_pod()
    # The server answers on the host itself, on every address the pod might try.
    for address in (host, POD_GATEWAY, "127.0.0.1"):
        with socket.create_connection((address, host_server), timeout=3):
            pass
    # The bridge's own address is routed: BENCHK8S-GUARD-IN (mangle) drops the
    # connection attempt, BENCHK8S-INPUT (filter) would refuse it.
    ok, said = _connects(pod_exec, pod, POD_GATEWAY, host_server)
    assert not ok, f"the pod reached the host's server at {POD_GATEWAY}:{host_server}"
    assert "timed out" in said or "refused" in said, said
    # The host's primary address is not even routed from the pod.
    ok, said = _connects(pod_exec, pod, host, host_server)
    assert not ok, f"the pod reached the host's server at {host}:{host_server}"
    assert "unreachable" in said, said
    # The port the cluster needs is still open: the API server through its service.
    ok, said = _connects(pod_exec, pod, *API_SERVICE)
    assert ok, f"the pod cannot reach the API server at {API_SERVICE}: {said}"


def test_no_route_leads_from_a_pod_off_this_machine(run_pod: RunPod, pod_exec: Exec) -> None:
    pod = run_pod()
    routes = pod_exec(pod, ["ip", "-4", "route", "show"]).stdout.decode()
    assert "default" not in routes, routes
    # `ip route get` only asks the kernel which route it would take; nothing is sent.
    for address in ("192.0.2.1", "8.8.8.8", "1.1.1.1", "172.17.0.1"):
        r = pod_exec(pod, ["ip", "route", "get", address])
        assert r.code != 0, f"a route leads from the pod to {address}: {r.stdout!r}"
        assert b"unreachable" in r.stderr.lower(), r.stderr
    inside = pod_exec(pod, ["ip", "route", "get", API_SERVICE[0]])
    assert inside.code == 0 and POD_GATEWAY.encode() in inside.stdout, inside


def test_pods_reach_each_other_over_the_pod_network(
    core: client.CoreV1Api,
    namespace: str,
    run_pod: RunPod,
    pod_exec: Exec,
    test_image: BuiltImage,
) -> None:
    server = client.V1Container(
        name="web", image=test_image.ref, command=["httpd", "-f", "-p", "8080", "-h", "/srv/www"]
    )
    run_pod("web", containers=[server])
    ip = wait_for_phase(core, namespace, "web", {"Running"}).status.pod_ip
    pod = run_pod("client")
    deadline = time.monotonic() + 30
    while (
        got := pod_exec(pod, ["timeout", "5", "wget", "-q", "-O", "-", f"http://{ip}:8080/"])
    ).code:
        assert time.monotonic() < deadline, got.stderr
        time.sleep(0.3)
    assert got.stdout == b"hello from the pod\n"


def _fetch(pod_exec: Exec, pod: str, url: str) -> bool:
    """One HTTP GET from the pod, given up after 4 s (busybox wget -T crashes)."""
    return pod_exec(pod, ["timeout", "4", "wget", "-q", "-O", "-", url]).code == 0


def _eventually(check: Callable[[], bool], want: bool, what: str, timeout: float = 30) -> None:
    """Policies and pods reach kube-router's rules asynchronously: wait for `want`."""
    deadline = time.monotonic() + timeout
    while check() != want:
        assert time.monotonic() < deadline, f"{what} did not become {want} in {timeout}s"
        time.sleep(0.5)


@pytest.fixture
def web(core: client.CoreV1Api, namespace: str, run_pod: RunPod, test_image: BuiltImage) -> str:
    """An HTTP server pod labelled app=web; its URL."""
    server = client.V1Container(
        name="web", image=test_image.ref, command=["httpd", "-f", "-p", "8080", "-h", "/srv/www"]
    )
    run_pod("web", containers=[server])
    ip = wait_for_phase(core, namespace, "web", {"Running"}).status.pod_ip
    return f"http://{ip}:8080/"


def test_an_ingress_network_policy_is_enforced(
    networking: client.NetworkingV1Api,
    namespace: str,
    run_pod: RunPod,
    pod_exec: Exec,
    web: str,
) -> None:
    friend, stranger = run_pod("friend"), run_pod("stranger")
    _eventually(lambda: _fetch(pod_exec, friend, web), True, "friend -> web before the policy")
    assert _fetch(pod_exec, stranger, web)

    only_friends = client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name="web-from-friends"),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(match_labels={"app": "web"}),
            policy_types=["Ingress"],
            ingress=[
                client.V1NetworkPolicyIngressRule(
                    _from=[
                        client.V1NetworkPolicyPeer(
                            pod_selector=client.V1LabelSelector(match_labels={"app": "friend"})
                        )
                    ],
                    ports=[client.V1NetworkPolicyPort(protocol="TCP", port=8080)],
                )
            ],
        ),
    )
    networking.create_namespaced_network_policy(namespace, only_friends)
    _eventually(lambda: _fetch(pod_exec, stranger, web), False, "stranger -> web under the policy")
    assert _fetch(pod_exec, friend, web), "the policy also denied the pod it allows"

    networking.delete_namespaced_network_policy("web-from-friends", namespace)
    _eventually(lambda: _fetch(pod_exec, stranger, web), True, "stranger -> web without the policy")


def test_an_egress_network_policy_is_enforced(
    networking: client.NetworkingV1Api,
    namespace: str,
    run_pod: RunPod,
    pod_exec: Exec,
    web: str,
) -> None:
    pod = run_pod("client")
    _eventually(lambda: _fetch(pod_exec, pod, web), True, "client -> web before the policy")
    deny_egress = client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name="client-no-egress"),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(match_labels={"app": "client"}),
            policy_types=["Egress"],
        ),
    )
    networking.create_namespaced_network_policy(namespace, deny_egress)
    _eventually(lambda: _fetch(pod_exec, pod, web), False, "client -> web under the policy")
