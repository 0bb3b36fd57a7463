"""The Kubernetes backend on the test cluster: start latency, listing, harness overhead.

    tests/k8s/cluster/cluster.sh up
    SSEBENCH_REGISTRY=127.0.0.1:5123/<prefix> ssebench images push --agents reference,dummy
    uv run python benchmarks/k8s_bench.py [--task TASK] [--runs 50] [--repeat 3] [--json]

1. Start latency on the warm cluster: from launching `ssebench run --backend k8s
   --prebuilt` (dummy agent) to the entrypoint's "agent started" line on its
   stdout, against a bare pod of the same image created through the API and
   waited to Running, in the same run (target: ratio <= 2). Where the time goes:
   `benchmarks/k8s_start_trace.py`.
2. Listing `--runs` runs: `ssebench runs list --json` against
   `kubectl get pods -l ... -o json` (target <= 10x), and in-process
   `list_runs` against the same API call with the client (target <= 1.5x).
3. Harness overhead: the wall time of a reference run on k8s and on Docker
   (same prebuilt image), reported.

Runs in a namespace of its own (deleted at the end), as the cluster admin.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SSEBENCH = str(ROOT / ".venv/bin/ssebench")
CLUSTER_SH = ROOT / "tests/k8s/cluster/cluster.sh"
KUBECTL = "/var/cache/ssebench-k8s/v1.35.4/bin/kubectl"


def _kubeconfig() -> str:
    return subprocess.run(
        [str(CLUSTER_SH), "kubeconfig"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _run_argv(task: str, agent: str, backend: str, run_id: str) -> list[str]:
    return [
        *(SSEBENCH, "run", "--task", task, "--agent", agent, "--backend", backend),
        *("--prebuilt", "--run-id", run_id, "--local", str(ROOT / "datasets/demo")),
    ]


def cli_start(task: str, env: dict[str, str], cwd: str) -> float:
    """Seconds from launching the CLI to the entrypoint's "agent started" line."""
    began = time.monotonic()
    run_id = "bench-" + secrets.token_hex(4)
    cli = subprocess.Popen(
        _run_argv(task, "dummy", "k8s", run_id),
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert cli.stdout is not None
    seen = None
    for line in cli.stdout:
        if seen is None and "agent started" in line:
            seen = time.monotonic() - began
    cli.wait()
    assert seen is not None, "no 'agent started' line"
    return seen


def bare_pod(core: Any, ns: str, image: str) -> float:
    """Seconds from creating a pod of `image` through the API to its phase Running."""
    from kubernetes import client

    name = "bare-" + secrets.token_hex(4)
    began = time.monotonic()
    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodSpec(
                containers=[client.V1Container(name="c", image=image, command=["sleep", "60"])],
                restart_policy="Never",
                termination_grace_period_seconds=0,
                automount_service_account_token=False,
            ),
        ),
    )
    while core.read_namespaced_pod(name, ns).status.phase != "Running":
        time.sleep(0.05)
    took = time.monotonic() - began
    core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    return took


def timed(argv: list[str], env: dict[str, str], cwd: str) -> float:
    began = time.monotonic()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="pyarchive-path-traversal")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from kubernetes import client, config

    kubeconfig = _kubeconfig()
    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)
    ns = "ssebench-bench-" + secrets.token_hex(3)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    env = {**os.environ, "KUBECONFIG": kubeconfig, "SSEBENCH_K8S_NAMESPACE": ns}
    # The CLI as installed (pip compiles bytecode at install; a first run writes it):
    # with PYTHONDONTWRITEBYTECODE set and no cache, every launch compiled the
    # client's 23 MB of generated sources again, seconds that no user pays.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "k8s-bench-pycache"))
    os.environ.update({"KUBECONFIG": kubeconfig, "SSEBENCH_K8S_NAMESPACE": ns})
    from ssebench.backends.k8s import KubernetesBackend
    from ssebench.spec import Mount, NetworkPolicy, RunSpec, contract, labels
    from ssebench.spec._images import registry

    image = f"{registry()}/agent-dummy/{args.task}:1"
    out: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as cwd:
            while True:  # the service account appears shortly after the namespace
                try:
                    core.read_namespaced_service_account("default", ns)
                    break
                except Exception:
                    time.sleep(0.2)
            bare_pod(core, ns, image)  # warm-up: the image on the node
            cli_start(args.task, env, cwd)
            starts = [cli_start(args.task, env, cwd) for _ in range(args.repeat)]
            bares = [bare_pod(core, ns, image) for _ in range(args.repeat)]
            out["start_cli_s"] = statistics.median(starts)
            out["start_bare_pod_s"] = statistics.median(bares)
            out["start_ratio"] = out["start_cli_s"] / out["start_bare_pod_s"]

            overhead_k8s = timed(_run_argv(args.task, "reference", "k8s", "ovk"), env, cwd)
            overhead_docker = timed(_run_argv(args.task, "reference", "docker", "ovd"), env, cwd)
            out["reference_run_k8s_s"] = overhead_k8s
            out["reference_run_docker_s"] = overhead_docker

            backend = KubernetesBackend()
            handles = []
            for index in range(args.runs):
                run_dir = Path(cwd) / f"list-{index}"
                (run_dir / "archive").mkdir(parents=True)
                handles.append(
                    backend.start(
                        RunSpec(
                            run_id=f"list-{index}",
                            task_name="t",
                            mode="sandbox",
                            image=image,
                            # An invalid difficulty: the entrypoint refuses at once, the
                            # pod (its keeper) stays: 50 listed runs that cost no CPU.
                            env={"SSE_DIFFICULTY": "9"},
                            results=Mount(target=contract.RESULTS_DIR, source=str(run_dir)),
                            archive=Mount(target=contract.ARCHIVE_DIR, source=str(run_dir)),
                            labels={labels.RUN_ID: f"list-{index}", labels.WEBUI: "true"},
                            network=NetworkPolicy(egress="open"),
                        )
                    )
                )
            selector = f"{labels.WEBUI}=true,ssebench.backend=k8s"
            cli = [SSEBENCH, "runs", "list", "--json", "--backend", "k8s"]
            kubectl = [KUBECTL, "-n", ns, "get", "pods", "-l", selector, "-o", "json"]
            timed(cli, env, cwd)  # warm-up
            cli_s = statistics.median(timed(cli, env, cwd) for _ in range(args.repeat))
            kubectl_s = statistics.median(timed(kubectl, env, cwd) for _ in range(args.repeat))
            found = json.loads(subprocess.run(cli, env=env, capture_output=True).stdout)["runs"]
            assert len(found) >= args.runs, len(found)

            def inproc() -> float:
                began = time.monotonic()
                backend.list_runs({labels.WEBUI: "true"})
                return time.monotonic() - began

            def raw() -> float:
                began = time.monotonic()
                core.list_namespaced_pod(ns, label_selector=selector)
                return time.monotonic() - began

            inproc()
            in_s = statistics.median(inproc() for _ in range(args.repeat * 3))
            raw_s = statistics.median(raw() for _ in range(args.repeat * 3))
            out.update(
                runs=len(found),
                list_cli_s=cli_s,
                list_kubectl_s=kubectl_s,
                list_ratio=cli_s / kubectl_s,
                list_inprocess_s=in_s,
                list_raw_api_s=raw_s,
                list_inprocess_ratio=in_s / raw_s,
            )
            for handle in handles:
                backend.remove(handle)
    finally:
        core.delete_namespace(ns, grace_period_seconds=0)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key:24} {value:.3f}" if isinstance(value, float) else f"{key:24} {value}")


if __name__ == "__main__":
    main()
