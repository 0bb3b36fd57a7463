"""Where a k8s run's start latency goes: one timeline per CLI start, then medians.

    SSEBENCH_REGISTRY=127.0.0.1:5123/<prefix> ssebench images push --agents dummy
    uv run python benchmarks/k8s_start_trace.py [--task TASK] [--repeat 5] [--egress restricted]

Each start is `ssebench run --backend k8s --prebuilt` of the dummy agent (as
`k8s_bench.py` measures it), while a watch on the namespace's pods notes, at the
moment it hears of it, every change a start goes through: a pod created (the
copy pod of `copy_from_image`, the run's pod), scheduled, each container
(init ones too) running or ended. The CLI's own lines are timed as they come.
Every time is in seconds since the CLI was launched.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from k8s_bench import (  # type: ignore[import-not-found]  # the sibling, on the path above
    _kubeconfig,
    _run_argv,
    bare_pod,
)


def _kind(name: str) -> str:
    return "copy" if name.startswith("ssebench-copy-") else "run"


class Timeline:
    """First moment each event was heard of, in seconds since `began`."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.events: dict[str, float] = {}
        self.lock = threading.Lock()

    def note(self, event: str) -> None:
        with self.lock:
            self.events.setdefault(event, time.monotonic() - self.began)


def _watch(core: Any, ns: str, stop: threading.Event, box: list[Timeline]) -> None:
    from kubernetes import watch

    while not stop.is_set():
        events = watch.Watch().stream(  # type: ignore[no-untyped-call]
            core.list_namespaced_pod, ns, timeout_seconds=2
        )
        for ev in events:
            line = box[0]
            pod = ev["object"]
            kind = _kind(pod.metadata.name)
            line.note(f"{kind} pod created")
            for cond in pod.status.conditions or []:
                if cond.type == "PodScheduled" and cond.status == "True":
                    line.note(f"{kind} pod scheduled")
                if cond.type == "Initialized" and cond.status == "True":
                    line.note(f"{kind} pod initialized")
            statuses = [
                *(pod.status.init_container_statuses or []),
                *(pod.status.container_statuses or []),
            ]
            for status in statuses:
                state = status.state
                if state is not None and state.running is not None:
                    line.note(f"{kind} {status.name} running")
                if state is not None and state.terminated is not None:
                    line.note(f"{kind} {status.name} ended")
            if pod.status.phase == "Running":
                line.note(f"{kind} pod Running")
            if ev["type"] == "DELETED":
                line.note(f"{kind} pod deleted")


def one_start(task: str, env: dict[str, str], cwd: str, box: list[Timeline]) -> Timeline:
    line = Timeline()
    box[0] = line
    cli = subprocess.Popen(
        _run_argv(task, "dummy", "k8s", "trace-" + secrets.token_hex(4)),
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert cli.stdout is not None
    for text in cli.stdout:
        if "agent started" in text:
            line.note("CLI: agent started")
        elif "starting run" in text:
            line.note("CLI: starting run")
        elif "run directory" in text:
            line.note("CLI: run directory")
        elif "ssebench-entrypoint" in text:
            line.note("CLI: entrypoint's first line")
    cli.wait()
    time.sleep(1.0)  # the watch's last events
    return line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="pyarchive-path-traversal")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from kubernetes import client, config

    kubeconfig = _kubeconfig()
    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)
    ns = "ssebench-trace-" + secrets.token_hex(3)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    env = {**os.environ, "KUBECONFIG": kubeconfig, "SSEBENCH_K8S_NAMESPACE": ns}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "k8s-bench-pycache"))
    from ssebench.spec._images import registry

    image = f"{registry()}/agent-dummy/{args.task}:1"
    stop = threading.Event()
    box = [Timeline()]
    watcher = threading.Thread(target=_watch, args=(core, ns, stop, box), daemon=True)
    try:
        while True:
            try:
                core.read_namespaced_service_account("default", ns)
                break
            except Exception:
                time.sleep(0.2)
        watcher.start()
        bare_pod(core, ns, image)
        with tempfile.TemporaryDirectory() as cwd:
            one_start(args.task, env, cwd, box)  # warm-up
            lines = [one_start(args.task, env, cwd, box) for _ in range(args.repeat)]
        bares = [bare_pod(core, ns, image) for _ in range(args.repeat)]
    finally:
        stop.set()
        core.delete_namespace(ns, grace_period_seconds=0)
    names = sorted(
        {e for line in lines for e in line.events},
        key=lambda e: statistics.median(line.events.get(e, 1e9) for line in lines),
    )
    for event in names:
        seen = [line.events[event] for line in lines if event in line.events]
        print(f"{event:36} {statistics.median(seen):7.3f}  (n={len(seen)})")
    start = statistics.median(line.events.get("CLI: agent started", 0.0) for line in lines)
    bare = statistics.median(bares)
    print(f"{'bare pod to Running':36} {bare:7.3f}")
    print(f"{'ratio':36} {start / bare:7.3f}")


if __name__ == "__main__":
    main()
