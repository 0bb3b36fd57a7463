"""What sidecar mode costs against sandbox mode, as ratios measured in the same run.

    uv run python benchmarks/sidecar_bench.py [--part time|builds|all] [--repeat N]

1. time: `ssebench run --agent reference` on each demo task in sidecar mode against
   the same run in sandbox mode, images cached; --repeat pairs of runs, one right
   after the other (in turns, either first), and the median of the pairs' ratios
   per task (target: ratio <= 1.15).
2. builds: the images of a sidecar run of a fresh agent (a copy of the dummy agent
   with a version of its own, so its layers are new) on one demo task, then on the
   other; the engine's build calls are counted by layer. The second task must send
   no build of an agent layer (target: 0 agent builds; the first task's count is the
   baseline). The fresh agent's images are removed afterwards.

Every run happens in a temporary directory and is removed with its results.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker

from ssebench.backends.docker import DockerBackend
from ssebench.spec import ImageRequest, default_dataset, find_agent, find_home, find_task
from ssebench.spec._home import AGENT_PATH_ENV

HOME = find_home(Path(__file__).resolve().parent)
SSEBENCH = str(Path(sys.executable).with_name("ssebench"))
DEMO_TASKS = ("tlvkit-heap-overflow", "pyarchive-path-traversal")
TIME_TARGET = 1.15


def ssebench_run(workdir: Path, task: str, mode: str) -> float:
    """`ssebench run --agent reference --mode MODE` in workdir; its wall time (it must pass)."""
    run_id = f"bench-{mode}-{secrets.token_hex(4)}"
    argv = [SSEBENCH, "run", "--task", task, "--agent", "reference", "--mode", mode]
    started = time.perf_counter()
    done = subprocess.run(
        [*argv, "--run-id", run_id, "--json"], cwd=workdir, capture_output=True, text=True
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"ssebench run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    status = json.loads(done.stdout)["patch_result"]["status"]
    if status != "passed":
        raise SystemExit(f"the reference agent did not pass {task} in {mode} mode: {status}")
    return elapsed


def time_part(repeat: int) -> bool:
    print("\n1. sidecar vs sandbox wall time, reference agent, images cached")
    met = True
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        for task in DEMO_TASKS:
            for mode in ("sandbox", "sidecar"):  # images built or found, untimed
                ssebench_run(workdir, task, mode)
            ratios = []
            for index in range(repeat):
                order = ("sandbox", "sidecar") if index % 2 == 0 else ("sidecar", "sandbox")
                seconds = {mode: ssebench_run(workdir, task, mode) for mode in order}
                ratios.append(seconds["sidecar"] / seconds["sandbox"])
                print(
                    f"   {task}: sandbox {seconds['sandbox']:.2f} s, "
                    f"sidecar {seconds['sidecar']:.2f} s, ratio {ratios[-1]:.3f}",
                    flush=True,
                )
            ratio = statistics.median(ratios)
            ok = ratio <= TIME_TARGET
            met = met and ok
            print(
                f"   {task}: median ratio {ratio:.3f} (target <= {TIME_TARGET}) "
                + ("met" if ok else "MISSED")
            )
    return met


class CountingBuilds:
    """Wraps the engine's build call: which tags the engine was asked to build."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.tags: list[str] = []
        self._build = client.api.build
        client.api.build = self  # type: ignore[method-assign]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.tags.append(str(kwargs.get("tag")))
        return self._build(*args, **kwargs)

    def agent_builds(self) -> list[str]:
        return [tag for tag in self.tags if "/agent-" in tag]


@contextmanager
def fresh_agent() -> Iterator[str]:
    """The name of a copy of the dummy agent that no image was built for yet, on the agent
    path (`SSEBENCH_AGENT_PATH`) while the block runs."""
    name = f"sidecar-bench-{secrets.token_hex(4)}"
    previous = os.environ.get(AGENT_PATH_ENV)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / name
        shutil.copytree(HOME / "agents" / "dummy", folder)
        text = (folder / "agent.yaml").read_text()
        (folder / "agent.yaml").write_text(text.replace("name: dummy", f"name: {name}"))
        os.environ[AGENT_PATH_ENV] = scratch
        try:
            yield name
        finally:
            if previous is None:
                os.environ.pop(AGENT_PATH_ENV, None)
            else:
                os.environ[AGENT_PATH_ENV] = previous


def builds_part() -> bool:
    print("\n2. engine build calls for a fresh agent's sidecar images, task after task")
    backend = DockerBackend()
    client = backend._client()
    counting = CountingBuilds(client)
    dataset = default_dataset(HOME)
    made: list[str] = []
    with fresh_agent() as name:
        agent = find_agent(HOME, name)
        counts = []
        for task_id in DEMO_TASKS:
            before = len(counting.tags)
            images = backend.prepare_images(
                ImageRequest(mode="sidecar", task=find_task(dataset, task_id), agent=agent)
            )
            made.append(images.agent)
            asked = counting.tags[before:]
            agent_layers = [tag for tag in asked if "/agent-" in tag]
            counts.append(len(agent_layers))
            print(f"   {task_id}: {len(asked)} build call(s), {len(agent_layers)} of agent layers")
    for tag in {*made, *counting.agent_builds()}:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, check=False)
    ok = counts[0] > 0 and counts[1] == 0
    print(
        f"   agent layers built for the second task: {counts[1]} (first task: {counts[0]}) "
        + ("met" if ok else "MISSED")
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["time", "builds", "all"], default="all")
    parser.add_argument("--repeat", type=int, default=3, help="pairs of runs per task")
    args = parser.parse_args()
    docker.from_env().ping()
    results = []
    if args.part in ("time", "all"):
        results.append(time_part(args.repeat))
    if args.part in ("builds", "all"):
        results.append(builds_part())
    print("\nall targets met" if all(results) else "\nsome target missed")


if __name__ == "__main__":
    main()
