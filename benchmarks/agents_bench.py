"""What a real agent costs: its image's build and size, and its start-up in a scripted run.

    uv run python benchmarks/agents_bench.py [--agent A] [--task T] [--part build|run|all]

1. build: a fresh copy of the agent (a version and a variable after its FROM of its own,
   so neither the inputs label nor the engine's cache knows it; an empty package cache,
   so its packages are prepared again, pip's own HTTP cache aside) built on the task's
   tool layer: cold. Then the same build again: cached (inputs unchanged, so no build
   is sent). Prints both times, their ratio, and the agent layer's size against the
   tool layer's (the baseline).
   The fresh copy's images are removed afterwards.
2. run: `ssebench run --model scripted` of the agent, its model replaying
   `scripts/model-scripts/<agent>/<task>.fix.json` (served on port 8808, as
   models.yaml's `scripted` expects), against `ssebench run --agent dummy` on the
   same task, images cached, one after the other. Prints both wall times, their ratio
   and difference (the agent's own start-up, its model calls and its commands), and
   the agent phase's duration of each.

Every run happens in a temporary directory that is removed with its results.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import docker
import msgspec

from ssebench.backends.docker._agent_layer import build_agent
from ssebench.backends.docker._layers import tool_image_name
from ssebench.runner.scripted import ScriptedModel, load_script
from ssebench.spec import default_dataset, find_agent, find_home, find_task

HOME = find_home(Path(__file__).resolve().parent)
SSEBENCH = str(Path(sys.executable).with_name("ssebench"))


def _size(client: docker.DockerClient, name: str) -> int:
    return int(client.images.get(name).attrs["Size"])


def bench_build(agent_name: str, task_id: str) -> None:
    client = docker.from_env()
    task = find_task(default_dataset(HOME), task_id)
    with tempfile.TemporaryDirectory(prefix="agents-bench-") as folder:
        path = Path(folder) / "agents"
        copy = path / agent_name
        shutil.copytree(find_agent(HOME, agent_name).folder, copy)
        version = f"bench-{secrets.token_hex(4)}"
        yaml = (copy / "agent.yaml").read_text()
        (copy / "agent.yaml").write_text(yaml.replace('version: "1"', f'version: "{version}"'))
        # A variable right after FROM: every later step is new to the engine's cache.
        dockerfile = (copy / "Dockerfile").read_text()
        dockerfile = dockerfile.replace(
            "FROM ${TOOL_IMAGE}\n", f"FROM ${{TOOL_IMAGE}}\nENV SSEBENCH_BENCH_NONCE={version}\n", 1
        )
        (copy / "Dockerfile").write_text(dockerfile)
        saved = os.environ.get("SSEBENCH_CACHE_DIR")
        os.environ["SSEBENCH_CACHE_DIR"] = str(Path(folder) / "cache")
        agent = msgspec.structs.replace(
            find_agent(HOME, agent_name), folder=str(copy), version=version
        )
        built: list[str] = []
        try:
            times = []
            for _ in range(2):
                started = time.perf_counter()
                image = build_agent(client, agent, task, HOME, lambda line: None)
                times.append(time.perf_counter() - started)
                built.append(image.tag)
            tool_size = _size(client, tool_image_name(task))
            agent_size = _size(client, built[-1])
            print(
                f"build {agent_name} on {task_id}: cold {times[0]:.1f} s, cached {times[1]:.2f} s"
            )
            print(f"  cached/cold ratio {times[1] / times[0]:.4f}")
            print(
                f"  size: agent layer {agent_size / 1e6:.0f} MB,"
                f" tool layer {tool_size / 1e6:.0f} MB"
                f" (the agent adds {(agent_size - tool_size) / 1e6:.0f} MB,"
                f" ratio {agent_size / tool_size:.2f})"
            )
        finally:
            if saved is None:
                os.environ.pop("SSEBENCH_CACHE_DIR", None)
            else:
                os.environ["SSEBENCH_CACHE_DIR"] = saved
            for tag in {*built, *_stage_tags(client, agent_name, version)}:
                client.images.remove(tag, force=True)


def _stage_tags(client: docker.DockerClient, agent: str, version: str) -> list[str]:
    return [
        tag
        for image in client.images.list()
        for tag in image.tags
        if f"/agent-stage/{agent}/" in tag and tag.endswith(f":{version}")
    ]


def _run(workdir: Path, task: str, agent: str, *options: str) -> tuple[float, dict[str, Any]]:
    argv = [SSEBENCH, "run", "--task", task, "--agent", agent, "--json", *options]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"ssebench run {agent} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return elapsed, json.loads(done.stdout)


def bench_run(agent: str, task: str) -> None:
    script = HOME / "scripts" / "model-scripts" / agent / f"{task}.fix.json"
    # Every address: the gateway reaches it as host.docker.internal (models.yaml).
    model = ScriptedModel(load_script(script), host="0.0.0.0", port=8808).start()  # noqa: S104
    try:
        with tempfile.TemporaryDirectory(prefix="agents-bench-") as folder:
            workdir = Path(folder)
            _run(workdir, task, agent, "--model", "scripted")  # images built and cached
            model.use(load_script(script))
            dummy, dummy_summary = _run(workdir, task, "dummy")
            real, summary = _run(workdir, task, agent, "--model", "scripted")
    finally:
        model.close()
    if summary["outcome"] != "passed":
        raise SystemExit(f"{agent} did not pass {task}: {summary['outcome']}")
    print(f"run {agent} (scripted, passed) vs dummy on {task}, images cached:")
    print(f"  wall: {agent} {real:.1f} s, dummy {dummy:.1f} s, ratio {real / dummy:.2f},")
    print(f"  difference {real - dummy:.1f} s")
    print(
        f"  agent phase: {agent} {summary['runtime_result']['agent_duration']:.1f} s,"
        f" dummy {dummy_summary['runtime_result']['agent_duration']:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="mini-swe-agent")
    parser.add_argument("--task", default="pyarchive-path-traversal")
    parser.add_argument("--part", choices=["build", "run", "all"], default="all")
    args = parser.parse_args()
    if args.part in ("build", "all"):
        bench_build(args.agent, args.task)
    if args.part in ("run", "all"):
        bench_run(args.agent, args.task)


if __name__ == "__main__":
    main()
