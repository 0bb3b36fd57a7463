"""What the limits and the reaper cost, as ratios against baselines measured in the same run.

    uv run python benchmarks/limits_bench.py [--part reap|limits|all] [--repeat N]

1. reap: the real `ssebench runs reap` with 50 runs present (labelled
   containers created without starting them, each with a lease: 25 of a live
   runner, this process, and 25 of a dead one, which the reap records as
   stopped and removes), against `ssebench runs list --json` over the same 50
   runs (target: ratio <= 2). Each round makes the 50 runs anew, times the list
   and then the reap, and removes what is left.
2. limits: the reference run of tlvkit-heap-overflow with the default limits
   against the same run with none (RunSpec.resources None), --repeat pairs one
   right after the other, either first in turn; the ratio of the medians
   (target: ratio <= 1.05).

Every container and run directory made here is removed afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import chdir, contextmanager
from pathlib import Path

import docker
import msgspec

from ssebench.spec import base_image, labels
from ssebench.spec.lease import current_lease

BIN = Path(sys.executable).parent
SSEBENCH = str(BIN / "ssebench")
OWNER_LABEL = "ssebench-bench.owner"
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
REAP_TARGET = 2.0
LIMITS_TARGET = 1.05
TASK = "tlvkit-heap-overflow"
RUNS = 50


def seconds(argv: Sequence[str], cwd: Path) -> float:
    """The wall time of one command (which must succeed)."""
    begin = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   cwd=cwd, env=CHILD_ENV)  # fmt: skip
    return time.perf_counter() - begin


@contextmanager
def leased_runs(count: int, results: Path) -> Iterator[None]:
    """`count` created containers labelled as runs, half of a live runner, half of a dead one."""
    client = docker.from_env()
    owner = secrets.token_hex(6)
    live = current_lease()
    dead = {**live, labels.LEASE_START: "0"}
    try:
        for number in range(count):
            run_id = f"bench-{owner}-{number:03d}"
            client.api.create_container(
                base_image(),
                command=["true"],
                name=f"ssebench-{run_id}",
                labels={
                    labels.RUN_ID: run_id,
                    labels.WEBUI: "true",
                    labels.TASK_ID: "bench-task",
                    labels.MODEL: "none",
                    labels.AGENT: "bench",
                    labels.RESULTS: str(results / run_id),
                    labels.REFERENCE_RUN: "false",
                    OWNER_LABEL: owner,
                    "ssebench.keep": "false",
                    **(live if number % 2 else dead),
                },
            )
        yield
    finally:
        for container in client.api.containers(
            all=True, filters={"label": f"{OWNER_LABEL}={owner}"}
        ):
            client.api.remove_container(container["Id"], force=True)
        client.close()


def report(name: str, ours: float, baseline: float, target: float) -> bool:
    ratio = ours / baseline
    verdict = "ok" if ratio <= target else "OVER TARGET"
    print(f"{name}: {ours * 1000:.0f} ms vs {baseline * 1000:.0f} ms, ratio {ratio:.3f} "
          f"(target <= {target:g}) {verdict}")  # fmt: skip
    return ratio <= target


def bench_reap(repeat: int) -> bool:
    with tempfile.TemporaryDirectory(prefix="ssebench-reap-bench-") as folder:
        work = Path(folder)
        reap = [SSEBENCH, "runs", "reap", "--dir", str(work / "results")]
        listing = [SSEBENCH, "runs", "list", "--json"]
        times: dict[str, list[float]] = {"reap": [], "list": []}
        for round_ in range(repeat + 1):  # the first round warms up, untimed
            with leased_runs(RUNS, work / "results"):
                took = {"list": seconds(listing, work), "reap": seconds(reap, work)}
            if round_:
                for name, value in took.items():
                    times[name].append(value)
        ours, baseline = (statistics.median(times[name]) for name in ("reap", "list"))
    return report(f"runs reap, {RUNS} runs ({RUNS // 2} of a dead runner)", ours, baseline,
                  REAP_TARGET)  # fmt: skip


def bench_limits(repeat: int) -> bool:
    from ssebench.runner import Runner
    from ssebench.runner._lifecycle import utc_now
    from ssebench.runner._plan import RunOptions, plan_run
    from ssebench.spec import get_backend

    backend = get_backend("docker")
    runner = Runner(backend)
    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="ssebench-limits-bench-") as folder, chdir(folder):

        def one(limited: bool) -> float:
            options = RunOptions(task=TASK, agent="reference", backend="docker")
            plan = plan_run(options, results_root=Path("results"), now=utc_now())
            if not limited:
                config = msgspec.structs.replace(plan.config, resources=None)
                plan = dataclasses.replace(plan, config=config)
            begin = time.perf_counter()
            summary = runner.run(plan)
            seconds = time.perf_counter() - begin
            assert summary.patch_result.status == "passed", summary.patch_result
            return seconds

        one(True)  # builds or finds the images
        for number in range(repeat):
            order = (True, False) if number % 2 == 0 else (False, True)
            for limited in order:
                times[limited].append(one(limited))
    print(f"limited runs: {[round(t, 2) for t in times[True]]}")
    print(f"unlimited runs: {[round(t, 2) for t in times[False]]}")
    return report("reference run with limits vs without", statistics.median(times[True]),
                  statistics.median(times[False]), LIMITS_TARGET)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("reap", "limits", "all"), default="all")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of each measurement")
    args = parser.parse_args()
    within = True
    if args.part in ("reap", "all"):
        within &= bench_reap(args.repeat)
    if args.part in ("limits", "all"):
        within &= bench_limits(args.repeat)
    return 0 if within else 1


if __name__ == "__main__":
    raise SystemExit(main())
