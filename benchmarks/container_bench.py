"""A run's container: start-up latency and the memory of SSEBench's own processes.

    uv run python benchmarks/container_bench.py [--task TASK] [--repeat N] [--json]

Uses the tool layer of a demo task (built first, like the tests do) and runs it
the way the Docker backend does: the run directory bind-mounted at
SSE_RESULTS, its archive at SSE_ARCHIVE, an agent command of our own.

1. Start latency: from `docker run -d` to the agent command's first
   instruction (it writes the wall clock into the archive), with the
   entrypoint's breakdown from `entrypoint.log` (daemon ready, MCP server
   listening, agent started), against a raw
   `docker run --rm --entrypoint true <same image>` measured in the same run
   (target: ratio <= 3).
2. Memory during the agent phase: the proportional set size (PSS, from
   /proc/PID/smaps_rollup) of the entrypoint, the daemon and the MCP server,
   each and together, once the agent runs (the MCP server listens; its SDK
   loads with its first client) and again after the agent called `test_patch`
   through the MCP SDK's client (target: <= 100 MB together).

Each measurement runs --repeat times (after one warm-up container); medians
are reported. Needs a Docker engine on this machine (PSS is read from the host's
/proc), root, and the base image.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from ssebench.spec import contract, default_dataset, find_home, find_task

DOCKER = shutil.which("docker") or "docker"
START_TARGET = 3.0
MEMORY_TARGET_MB = 100.0
LABEL = "ssebench-bench.container"

MCP_CALL = r"""
import asyncio
from mcp import Client

async def main():
    async with Client("http://127.0.0.1:3000/mcp", read_timeout_seconds=600) as client:
        result = await client.call_tool("test_patch", {})
    print("".join(getattr(block, "text", "") for block in result.content).splitlines()[0])

asyncio.run(main())
"""

AGENT = 'date +%s.%N > "$SSE_ARCHIVE/agent-started"; exec sleep 3600'

MODULES = {
    "entrypoint": "ssebench.daemon.entrypoint",
    "daemon": "ssebench.daemon",
    "MCP server": "ssebench.daemon.mcp",
}

_LINE = re.compile(r"\[\s*([0-9.]+)s\] (.*?) after ([0-9.]+) s")


@dataclass
class Sample:
    """One container: start-up figures (seconds) and PSS figures (MB)."""

    start: float
    steps: dict[str, float] = field(default_factory=dict)
    idle: dict[str, float] = field(default_factory=dict)
    after_call: dict[str, float] = field(default_factory=dict)


def build_image(task_id: str) -> str:
    """The task's tool layer, built from this checkout (cached by the engine)."""
    from ssebench.backends.docker import build_case, build_tool

    home = find_home(Path(__file__).resolve().parent)
    client = docker.from_env()
    try:
        task = find_task(default_dataset(home), task_id)
        build_case(client, task)
        return build_tool(client, task, home).tag
    finally:
        client.close()


def raw_start(image: str) -> float:
    """Wall time of `docker run --rm --entrypoint true <image>`."""
    begin = time.time()
    subprocess.run(
        [DOCKER, "run", "--rm", "--network", "none", "--entrypoint", "true", image],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.time() - begin


def _descendants(pid: int) -> list[int]:
    """`pid` and every process below it (read from the host's /proc)."""
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").iterdir():
            children = (task / "children").read_text().split()
            stack.extend(int(child) for child in children)
    return found


def _pss(name: str) -> dict[str, float]:
    """PSS in MB of the entrypoint, daemon and MCP server, read from the host.

    No probe runs inside the container, so nothing of ours shares (and so
    lowers) the pages the three processes map.
    """
    pid = int(
        subprocess.run(
            [DOCKER, "inspect", "-f", "{{.State.Pid}}", name],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    found: dict[str, int] = {}
    for process in _descendants(pid):
        try:
            words = Path(f"/proc/{process}/cmdline").read_bytes().decode().split("\0")
            rollup = Path(f"/proc/{process}/smaps_rollup").read_text()
        except OSError:
            continue
        if "-m" not in words:
            continue
        module = words[words.index("-m") + 1]
        found[module] = found.get(module, 0) + int(rollup.split("\nPss:", 1)[1].split()[0])
    figures = {label: found.get(module, 0) / 1024 for label, module in MODULES.items()}
    figures["together"] = sum(figures.values())
    return figures


def _wait(path: Path, pattern: str, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            text = path.read_text()
        except OSError:
            text = ""
        if pattern in text:
            return text
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {pattern!r} in {path}")


def one_run(image: str, memory: bool) -> Sample:
    """Start the container, time it, measure memory, remove it."""
    run_dir = Path(tempfile.mkdtemp(prefix="sse-bench-"))
    (run_dir / contract.RUN_ARCHIVE).mkdir()
    (run_dir / contract.RESULT_FILE).touch()
    name = f"sse-bench-{secrets.token_hex(4)}"
    argv = [
        DOCKER, "run", "-d", "--name", name, "--label", f"{LABEL}=1", "--network", "none",
        "--security-opt", "no-new-privileges",
        "-v", f"{run_dir}:{contract.RESULTS_DIR}",
        "-v", f"{run_dir / 'archive'}:{contract.ARCHIVE_DIR}",
        "-e", f"{contract.ENV_RESULTS}={contract.RESULTS_DIR}",
        "-e", f"{contract.ENV_ARCHIVE}={contract.ARCHIVE_DIR}",
        "-e", f"{contract.ENV_DIFFICULTY}=2",
        "-e", f"{contract.ENV_TIMEOUT}={contract.DEFAULT_AGENT_TIMEOUT}",
        image, "/bin/bash", "-c", AGENT,
    ]  # fmt: skip
    try:
        begin = time.time()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        started = float(_wait(run_dir / contract.RUN_ARCHIVE / "agent-started", "\n", 120))
        log = _wait(run_dir / contract.ENTRYPOINT_LOG, "agent started as model", 120)
        sample = Sample(start=started - begin)
        for match in _LINE.finditer(log):
            # "<step> after <seconds> s": seconds since the entrypoint (or, for the
            # services, its start of them a few ms later) began.
            sample.steps.setdefault(match.group(2), float(match.group(3)))
        # The entrypoint's clock starts with it: place it on the container's timeline.
        offset = sample.start - sample.steps.get("agent started", 0.0)
        sample.steps = {k: v + offset for k, v in sample.steps.items()}
        sample.steps["entrypoint started"] = offset
        if memory:
            time.sleep(1.0)
            sample.idle = _pss(name)
            subprocess.run(
                [DOCKER, "exec", "--user", contract.MODEL_USER, name,
                 contract.RUNTIME_PYTHON, "-I", "-c", MCP_CALL],
                check=True, capture_output=True,
            )  # fmt: skip
            time.sleep(0.5)
            sample.after_call = _pss(name)
        return sample
    finally:
        subprocess.run([DOCKER, "rm", "-f", name], capture_output=True, check=False)
        shutil.rmtree(run_dir, ignore_errors=True)


def _median(values: list[dict[str, float]]) -> dict[str, float]:
    keys = values[0].keys() if values else []
    return {key: statistics.median(v[key] for v in values if key in v) for key in keys}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="tlvkit-heap-overflow")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    image = build_image(args.task)
    raw_start(image)
    one_run(image, memory=False)  # warm-up
    raw: list[float] = []
    samples: list[Sample] = []
    for _ in range(args.repeat):
        raw.append(raw_start(image))
        samples.append(one_run(image, memory=True))
    baseline = statistics.median(raw)
    start = statistics.median(s.start for s in samples)
    steps = _median([s.steps for s in samples])
    idle = _median([s.idle for s in samples])
    after = _median([s.after_call for s in samples])
    ratio = start / baseline
    figures: dict[str, Any] = {
        "image": image,
        "repeat": args.repeat,
        "raw_docker_run_s": baseline,
        "agent_started_s": start,
        "ratio": ratio,
        "steps_s": steps,
        "pss_idle_mb": idle,
        "pss_after_test_patch_mb": after,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"image {image}, medians of {args.repeat} runs")
        verdict = "ok" if ratio <= START_TARGET else "OVER TARGET"
        print(
            f"start -> agent command: {start:.3f} s vs raw docker run {baseline:.3f} s, "
            f"ratio {ratio:.2f} (target <= {START_TARGET:g}) {verdict}"
        )
        for step, seconds in sorted(steps.items(), key=lambda item: item[1]):
            print(f"  {step:<28} {seconds:7.3f} s after docker run")
        for label, pss in (("agent phase, MCP not called", idle), ("after one test_patch", after)):
            within = "ok" if pss["together"] <= MEMORY_TARGET_MB else "OVER TARGET"
            each = ", ".join(f"{k} {v:.1f}" for k, v in pss.items() if k != "together")
            print(
                f"PSS ({label}): {each}; together {pss['together']:.1f} MB "
                f"(target <= {MEMORY_TARGET_MB:g}) {within}"
            )
    passed = ratio <= START_TARGET and max(idle["together"], after["together"]) <= MEMORY_TARGET_MB
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
