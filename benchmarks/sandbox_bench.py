"""What the harness costs around a sandbox run: ratios against baselines measured in the same run.

    uv run python benchmarks/sandbox_bench.py [--part overhead|latency|parallel|all] [--repeat N]

1. overhead: `ssebench run --agent reference` on each demo task against the same
   checks run directly in plain containers of the case image, a container and a
   fresh copy of the tree per check (build and PoCs share one, as in the daemon);
   --repeat pairs of a run and its direct checks, one right after the other (in
   turns, either first), and the median of the pairs' ratios (target: ratio <= 1.3).
2. latency: `ssebench run` invoked -> the agent's first line of output, images
   cached, with a breakdown (images ready, container started, agent's first
   line), against `docker run --rm --entrypoint true <agent image>`, which
   starts a container of the same image without SSEBench's entrypoint
   (target: ratio <= 5).
3. parallel: four dummy runs at once against the same four one after another
   (target: ratio <= 0.8); all eight must succeed.
4. baseline (only with `--baseline DIR`, a worktree of another commit whose
   `.venv` is synced, e.g. `git worktree add DIR <parent>; cd DIR; uv sync
   --all-packages`): the same `ssebench run --agent reference` on each demo task
   from this tree and from DIR's, in turns (either first), --repeat pairs, the
   median pair's ratio (target: ratio <= 1.05). The baseline's images live under
   a registry name of their own, so neither side rebuilds the other's.

Every run happens in a temporary directory and is removed with its results.
Images are built (or found in the engine's cache) before anything is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker

from ssebench.backends.docker import case_image_name
from ssebench.backends.docker._agent_layer import agent_image_name
from ssebench.spec import Task, find_agent, find_home, find_task

HOME = find_home(Path(__file__).resolve().parent)
SSEBENCH = str(Path(sys.executable).with_name("ssebench"))
DEMO_TASKS = ("tlvkit-heap-overflow", "pyarchive-path-traversal")
OVERHEAD_TARGET = 1.3
LATENCY_TARGET = 5.0
PARALLEL_TARGET = 0.8
BASELINE_TARGET = 1.05
BASELINE_REGISTRY = "ssebench-baseline"

PROLOGUE = r"""
set -eu
useradd --system --user-group --no-create-home --home-dir /nonexistent \
  --shell /usr/sbin/nologin sse-runner
fresh() {
  rm -rf /tmp/work && cp -a {source} /tmp/work && (cd /tmp/work && git apply -p1 "$@") \
    && chown -R sse-runner:sse-runner /tmp/work
}
as_runner() {
  (cd /tmp/work && setpriv --reuid=sse-runner --regid=sse-runner --clear-groups \
    env -i PATH=/usr/local/bin:/usr/bin:/bin "$@")
}
"""

CHECKS = {
    # PoCs run in the build's copy, as the daemon's run_poc does.
    "build and PoCs": """
fresh /ssebench/diffs/patch.diff && as_runner bash /ssebench/scripts/build.sh
for poc in {pocs}; do as_runner bash /ssebench/scripts/run.sh "/ssebench/$poc"; done""",
    "function test": "fresh /ssebench/diffs/patch.diff && as_runner bash /ssebench/scripts/test.sh",
    "intent test": """fresh /ssebench/diffs/patch.diff /ssebench/diffs/test.diff
as_runner bash /ssebench/scripts/test.sh""",
}


def ssebench_run(
    workdir: Path,
    task: str,
    agent: str,
    *extra: str,
    program: str = SSEBENCH,
    env: dict[str, str] | None = None,
) -> tuple[float, dict[str, object]]:
    """Run `ssebench run --json` in workdir (`program`: another tree's); its wall time and
    summary."""
    run_id = f"bench-{agent}-{secrets.token_hex(4)}"
    argv = [program, "run", "--task", task, "--agent", agent, "--run-id", run_id, "--json"]
    started = time.perf_counter()
    done = subprocess.run(
        [*argv, *extra],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"ssebench run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return elapsed, json.loads(done.stdout)


def prepare(tasks: Sequence[str], agents: Sequence[str]) -> None:
    """Build every image the benchmark uses (untimed): one throwaway run per agent and task."""
    with tempfile.TemporaryDirectory() as workdir:
        for task in tasks:
            for agent in agents:
                print(f"preparing {agent} on {task} ...", file=sys.stderr, flush=True)
                ssebench_run(Path(workdir), task, agent, "--timeout", "600")


def timed(argv: Sequence[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def direct_checks(task: Task) -> float:
    """The reference fix's checks in plain containers of the case image: one per check."""
    config = task.config
    pocs = " ".join(shlex.quote(poc) for poc in config.files.poc)
    prologue = PROLOGUE.replace("{source}", shlex.quote(config.source))
    argv = ["docker", "run", "--rm", "--network", "none", "--user", "0", case_image_name(task)]
    return sum(
        timed([*argv, "bash", "-c", prologue + body.replace("{pocs}", pocs)])
        for body in CHECKS.values()
    )


def overhead(repeat: int) -> bool:
    print("\n1. harness overhead: ssebench run (reference agent) vs the checks run directly")
    ok = True
    with tempfile.TemporaryDirectory() as workdir:
        for task_id in DEMO_TASKS:
            task = find_task(HOME / "datasets" / "demo", task_id)
            # In pairs, one right after the other, so that a busy spell of the machine
            # weighs on both sides of a ratio; the figure is the median pair's ratio.
            # Every other pair starts with the direct side, so that neither side
            # always finds the caches warmed (or the engine busy) by the other.
            harness_times, direct_times = [], []
            for index in range(repeat):
                if index % 2:
                    direct_times.append(direct_checks(task))
                    harness_times.append(ssebench_run(Path(workdir), task_id, "reference")[0])
                else:
                    harness_times.append(ssebench_run(Path(workdir), task_id, "reference")[0])
                    direct_times.append(direct_checks(task))
            ratios = [h / d for h, d in zip(harness_times, direct_times, strict=True)]
            ratio = statistics.median(ratios)
            ok &= ratio <= OVERHEAD_TARGET
            print(
                f"   {task_id}: ssebench run {statistics.median(harness_times):.2f}s, "
                f"direct {statistics.median(direct_times):.2f}s (medians of {repeat}); "
                f"ratio {ratio:.2f} (median of the pairs' {min(ratios):.2f}-{max(ratios):.2f}; "
                f"target <= {OVERHEAD_TARGET})"
            )
    return ok


def first_lines(workdir: Path, task: str, agent: str, marks: dict[str, str]) -> dict[str, float]:
    """Seconds from invoking `ssebench run` until a line containing each mark appears."""
    run_id = f"bench-latency-{secrets.token_hex(4)}"
    argv = [SSEBENCH, "run", "--task", task, "--agent", agent, "--run-id", run_id]
    seen: dict[str, float] = {}
    started = time.perf_counter()
    cli = subprocess.Popen(
        argv, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert cli.stdout is not None

    def read() -> None:
        assert cli.stdout is not None
        for line in cli.stdout:
            for name, mark in marks.items():
                if name not in seen and mark in line:
                    seen[name] = time.perf_counter() - started

    reader = threading.Thread(target=read)
    reader.start()
    cli.wait()
    reader.join()
    if cli.returncode != 0:
        raise SystemExit(f"the latency run failed with status {cli.returncode}")
    return seen


def latency() -> bool:
    print("\n2. start latency: ssebench run invoked -> the agent's first line (images cached)")
    task_id = DEMO_TASKS[1]
    task = find_task(HOME / "datasets" / "demo", task_id)
    agent = find_agent(HOME, "dummy")
    marks = {
        "images ready, container starting": "starting run",
        "agent's first line": "dummy agent: working in",
    }
    with tempfile.TemporaryDirectory() as workdir:
        samples = [first_lines(Path(workdir), task_id, "dummy", marks) for _ in range(3)]
    image = agent_image_name(agent, task)
    raw = statistics.median(
        timed(["docker", "run", "--rm", "--entrypoint", "true", image]) for _ in range(5)
    )
    for name in marks:
        values = [sample[name] for sample in samples if name in sample]
        if len(values) != len(samples):
            raise SystemExit(f"the output never showed {marks[name]!r}")
        print(f"   {name}: {statistics.median(values):.2f}s")
    total = statistics.median(sample["agent's first line"] for sample in samples)
    ratio = total / raw
    print(f"   docker run --rm --entrypoint true {image}: {raw:.2f}s")
    print(f"   ratio {ratio:.2f} (target <= {LATENCY_TARGET})")
    return ratio <= LATENCY_TARGET


def parallel() -> bool:
    print("\n3. four dummy runs at once vs the same four in sequence")
    task_id = DEMO_TASKS[1]
    with tempfile.TemporaryDirectory() as workdir:
        started = time.perf_counter()
        sequential = [ssebench_run(Path(workdir), task_id, "dummy")[1] for _ in range(4)]
        in_sequence = time.perf_counter() - started
        started = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(ssebench_run, Path(workdir), task_id, "dummy") for _ in range(4)]
            together = [future.result()[1] for future in futures]
        at_once = time.perf_counter() - started
    statuses = [str(s["patch_result"]["status"]) for s in [*sequential, *together]]  # type: ignore[index]
    if statuses != ["failed"] * 8:
        raise SystemExit(f"a run did not end as the dummy agent's runs do: {statuses}")
    ratio = at_once / in_sequence
    print(f"   in sequence {in_sequence:.1f}s, at once {at_once:.1f}s; all 8 graded 'failed'")
    print(f"   ratio {ratio:.2f} (target <= {PARALLEL_TARGET})")
    return ratio <= PARALLEL_TARGET


def baseline(tree: Path, repeat: int) -> bool:
    print(f"\n4. a reference run of this tree vs the same run of {tree}")
    program = str(tree / ".venv" / "bin" / "ssebench")
    env = {"SSEBENCH_REGISTRY": BASELINE_REGISTRY}
    ok = True
    with tempfile.TemporaryDirectory() as workdir:
        for task_id in DEMO_TASKS:
            ssebench_run(Path(workdir), task_id, "reference", program=program, env=env)  # builds

            def ours(task: str = task_id) -> float:
                return ssebench_run(Path(workdir), task, "reference")[0]

            def theirs(task: str = task_id) -> float:
                return ssebench_run(Path(workdir), task, "reference", program=program, env=env)[0]

            pairs = []
            for index in range(repeat):
                if index % 2:
                    other = theirs()
                    pairs.append((ours(), other))
                else:
                    pairs.append((ours(), theirs()))
            ratios = [mine / other for mine, other in pairs]
            ratio = statistics.median(ratios)
            ok &= ratio <= BASELINE_TARGET
            print(
                f"   {task_id}: this tree {statistics.median(p[0] for p in pairs):.2f}s, "
                f"baseline {statistics.median(p[1] for p in pairs):.2f}s (medians of {repeat}); "
                f"ratio {ratio:.2f} (median of the pairs' {min(ratios):.2f}-{max(ratios):.2f}; "
                f"target <= {BASELINE_TARGET})"
            )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--part", choices=["overhead", "latency", "parallel", "baseline", "all"], default="all"
    )
    parser.add_argument(
        "--repeat", type=int, default=7, help="pairs of samples (the median ratio counts)"
    )
    parser.add_argument(
        "--baseline", type=Path, help="a worktree of another commit, its .venv synced (part 4)"
    )
    args = parser.parse_args()
    part = args.part
    if part == "baseline" and args.baseline is None:
        parser.error("--part baseline needs --baseline DIR")
    docker.from_env().ping()
    prepare(DEMO_TASKS, ["reference", "dummy"])
    results = []
    if args.baseline is not None and part in ("baseline", "all"):
        results.append(baseline(args.baseline.resolve(), args.repeat))
    if part in ("overhead", "all"):
        results.append(overhead(args.repeat))
    if part in ("latency", "all"):
        results.append(latency())
    if part in ("parallel", "all"):
        results.append(parallel())
    print("\nall targets met" if all(results) else "\nsome target missed")


if __name__ == "__main__":
    main()
