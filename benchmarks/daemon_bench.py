"""How fast the in-container daemon is, as ratios against a baseline measured in the same run.

    uv run python benchmarks/daemon_bench.py [--repeat N] [--files N] [--task ID]

The daemon runs as root in a container of a demo task's tool image (built
from this checkout if needed; the container is removed afterwards).

1. The `bash` tool's round trip of `true`, from a client kept running inside
   the container as `model` (one connection to the agent socket, N requests),
   against `docker exec <container> true` from the host: both medians and the
   ratio (target: <= 0.1).
2. The daemon's scratch copy (`copy_tree`, as a check makes it: fd-relative,
   every entry owned by sse-runner) of a 20,000-file tree, against `cp -a` of
   the same tree, alternating, in the same container (target: ratio <= 1.2).

Each measurement runs --repeat times after one warm-up; medians are compared.
Needs a Docker engine with the base image.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import docker

from ssebench.backends.docker import build_case, build_runtime, build_tool
from ssebench.spec import contract, default_dataset, find_home, find_task

PYTHON = contract.RUNTIME_PYTHON
BASH_TARGET = 0.1
COPY_TARGET = 1.2

BASH_CLIENT = r"""
import http.client, json, socket, sys, time

class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sys.argv[1])

conn = Unix("localhost", timeout=60)
body = json.dumps({"command": "true"}).encode()
headers = {"Content-Type": "application/json"}
times = []
for _ in range(int(sys.argv[2]) + 1):
    begin = time.perf_counter()
    conn.request("POST", "/tool/bash?action=execute", body=body, headers=headers)
    answer = json.loads(conn.getresponse().read())
    times.append(time.perf_counter() - begin)
    assert answer["code"] == 0, answer
print(json.dumps(times[1:]))
"""

COPY_RUN = r"""
import asyncio, json, pwd, shutil, subprocess, sys, time
from pathlib import Path
from ssebench.daemon.server._tree import copy_tree, remove_tree

files, repeat = int(sys.argv[1]), int(sys.argv[2])
root = Path("/var/tmp/ssebench-bench")
shutil.rmtree(root, ignore_errors=True)
tree = root / "tree"
per_dir = 100
for number in range(files):
    folder = tree / f"d{number // per_dir:03d}" / ("sub" if number % 3 else "")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"f{number:05d}.c").write_bytes(b"x" * (200 + number % 4000))
runner = pwd.getpwnam("sse-runner")
owner = (runner.pw_uid, runner.pw_gid)

def ours():
    begin = time.perf_counter()
    asyncio.run(copy_tree(tree, root / "ours", owner=owner))
    took = time.perf_counter() - begin
    asyncio.run(remove_tree(root / "ours"))
    return took

def baseline():
    begin = time.perf_counter()
    subprocess.run(["cp", "-a", "--", str(tree), str(root / "cp")], check=True)
    took = time.perf_counter() - begin
    shutil.rmtree(root / "cp")
    return took

ours(), baseline()
result = {"ours": [], "cp": []}
for number in range(repeat):  # alternating which goes first
    if number % 2:
        result["cp"].append(baseline())
    result["ours"].append(ours())
    if not number % 2:
        result["cp"].append(baseline())
shutil.rmtree(root)
print(json.dumps(result))
"""


def docker_cli(*args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["docker", *args], input=stdin, capture_output=True, check=True, timeout=1800
    ).stdout


def tool_image(task_id: str) -> str:
    home = find_home(Path(__file__).resolve().parent)
    client = docker.from_env()
    try:
        build_runtime(client, home)
        task = find_task(default_dataset(home), task_id)
        build_case(client, task)
        return build_tool(client, task, home).tag
    finally:
        client.close()


def start_daemon(image: str) -> str:
    name = f"ssebench-bench-daemon-{uuid.uuid4().hex[:10]}"
    docker_cli(
        "run", "-d", "--init", "--network", "none", "--name", name,
        "-e", "SSE_DIFFICULTY=0", "--entrypoint", PYTHON, image, "-I", "-m", "ssebench.daemon",
    )  # fmt: skip
    for _ in range(300):
        done = subprocess.run(
            ["docker", "exec", name, "test", "-S", contract.SANDBOX_DAEMON_SOCKET],
            capture_output=True,
        )
        if done.returncode == 0:
            return name
        time.sleep(0.1)
    logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True)
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    raise SystemExit(f"the daemon did not start:\n{logs.stdout}{logs.stderr}")


def report(name: str, ours: float, baseline: float, target: float) -> bool:
    ratio = ours / baseline
    verdict = "ok" if ratio <= target else "OVER TARGET"
    print(
        f"{name}: {ours * 1000:.2f} ms vs {baseline * 1000:.2f} ms, ratio {ratio:.3f} "
        f"(target <= {target:g}) {verdict}",
        flush=True,
    )
    return ratio <= target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="measurements of each")
    parser.add_argument("--files", type=int, default=20_000, help="files in the copied tree")
    parser.add_argument("--task", default="pyarchive-path-traversal", help="demo task")
    args = parser.parse_args()
    image = tool_image(args.task)
    name = start_daemon(image)
    try:
        timings = json.loads(
            docker_cli(
                "exec", "--user", "model", name, PYTHON, "-I", "-c", BASH_CLIENT,
                contract.SANDBOX_DAEMON_SOCKET, str(max(args.repeat, 50)),
            )
        )  # fmt: skip
        bash_median = statistics.median(timings)

        def exec_true() -> float:
            begin = time.perf_counter()
            docker_cli("exec", name, "true")
            return time.perf_counter() - begin

        exec_true()
        exec_median = statistics.median(exec_true() for _ in range(args.repeat))
        within = report("bash tool round trip of `true`", bash_median, exec_median, BASH_TARGET)

        copies = json.loads(
            docker_cli(
                "exec", name, PYTHON, "-I", "-c", COPY_RUN, str(args.files), str(args.repeat)
            )
        )
        within &= report(
            f"scratch copy of {args.files} files",
            statistics.median(copies["ours"]),
            statistics.median(copies["cp"]),
            COPY_TARGET,
        )
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True)
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
