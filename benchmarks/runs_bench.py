"""How fast `ssebench runs` answers, as ratios against a baseline measured in the same run.

    uv run python benchmarks/runs_bench.py [--repeat N]

1. `ssebench runs list --json` with 50 runs present, against
   `docker ps -a --filter label=ssebench.webui=true --format '{{json .}}'`
   (target: ratio <= 20). The 50 runs are labelled containers created without
   starting them, and are removed afterwards.
2. `ssebench runs results --json` over 10,000 synthetic run directories, against
   `find results -name summary.json -exec cat {} +` over the same tree
   (target: ratio <= 3).

Each command runs --repeat times (after one warm-up run), the commands of a part
taking turns; the medians are compared.
The commands run as on an installed machine: with Python's bytecode cache
(PYTHONDONTWRITEBYTECODE is dropped for them, so the warm-up writes it).
Needs a Docker engine with the base image (or the probe image) for part 1.
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import docker
import docker.errors

from ssebench.spec import base_image, contract, labels

BIN = Path(sys.executable).parent
SSEBENCH = str(BIN / "ssebench")
SSEBENCH_RUNS = str(BIN / "ssebench-runs")
OWNER_LABEL = "ssebench-bench.owner"
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
LIST_TARGET = 20.0
RESULTS_TARGET = 3.0


def median_seconds(
    commands: dict[str, Sequence[str]], repeat: int, cwd: Path | None = None
) -> dict[str, float]:
    """The median wall time of each command over `repeat` rounds, after one warm-up each.

    Each round runs every command once, in turn, so a change in the machine's
    load during the benchmark weighs on the baseline and on SSEBench alike.
    Output is discarded.
    """

    def once(argv: Sequence[str]) -> float:
        begin = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, cwd=cwd, env=CHILD_ENV)
        return time.perf_counter() - begin

    for argv in commands.values():
        once(argv)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, argv in commands.items():
            times[name].append(once(argv))
    return {name: statistics.median(values) for name, values in times.items()}


def _image(client: docker.DockerClient) -> str:
    for name in (base_image(), "ssebench-test/probe:conformance"):
        try:
            client.images.get(name)
        except docker.errors.ImageNotFound:
            continue
        return name
    raise SystemExit(f"no image to create runs from: build {base_image()} first")


@contextmanager
def stopped_runs(count: int) -> Iterator[None]:
    """`count` containers labelled as runs of `ssebench run`, created and never started."""
    client = docker.from_env()
    image = _image(client)
    owner = secrets.token_hex(6)
    try:
        for number in range(count):
            run_id = f"bench-{owner}-{number:03d}"
            client.api.create_container(
                image,
                command=["true"],
                name=f"ssebench-{run_id}",
                labels={
                    labels.RUN_ID: run_id,
                    labels.WEBUI: "true",
                    labels.TASK_ID: "bench-task",
                    labels.MODEL: "none",
                    labels.AGENT: "bench",
                    labels.RESULTS: f"/nonexistent/{run_id}",
                    labels.REFERENCE_RUN: "false",
                    OWNER_LABEL: owner,
                },
            )
        yield
    finally:
        for container in client.api.containers(
            all=True, filters={"label": f"{OWNER_LABEL}={owner}"}
        ):
            client.api.remove_container(container["Id"], force=True)
        client.close()


def _summary(task: str, model: str, agent: str, run_id: str, started_at: str) -> bytes:
    return json.dumps(
        {
            "task": task,
            "config": {
                "agent": agent,
                "model": model,
                "mode": "sandbox",
                "backend": "docker",
                "difficulty": 0,
                "timeout": contract.DEFAULT_AGENT_TIMEOUT,
                "egress": "restricted",
                "reference_run": False,
                "keep": False,
            },
            "patch_result": {
                "status": "passed",
                "build_success": True,
                "pov_passed": 2,
                "pov_total": 2,
                "func_test_success": True,
                "intent_test_success": None,
                "error_msg": None,
                "error_log": None,
            },
            "runtime_result": {
                "agent_duration": 123.4,
                "agent_timeout": False,
                "evaluator_timeout": False,
                "agent_exit_code": 0,
            },
            "run_id": run_id,
            "started_at": started_at,
            "spend": 0.42,
        },
        indent=2,
    ).encode()


def make_results(root: Path, count: int) -> None:
    """`count` run directories in the runner's layout, each with a `latest` link beside it."""
    number = 0
    for task in range(10):
        for model in ("none", "gpt-x"):
            for agent in ("reference", "dummy", "alpha", "beta", "gamma"):
                parent = root / f"task-{task}" / model / agent
                per_agent = count // 100
                for _ in range(per_agent):
                    run_id = f"20250101T{number:06d}Z-{secrets.token_hex(3)}"
                    run_dir = parent / run_id
                    (run_dir / contract.RUN_ARCHIVE).mkdir(parents=True)
                    (run_dir / contract.RESULT_FILE).write_text("{}")
                    started = (
                        f"2025-01-01T{number // 3600 % 24:02d}:{number // 60 % 60:02d}:00+00:00"
                    )
                    (run_dir / contract.SUMMARY_FILE).write_bytes(
                        _summary(f"task-{task}", model, agent, run_id, started)
                    )
                    number += 1
                (parent / "latest").symlink_to(run_id)


def report(name: str, ours: float, baseline: float, target: float) -> bool:
    ratio = ours / baseline
    verdict = "ok" if ratio <= target else "OVER TARGET"
    print(
        f"{name}: {ours * 1000:.0f} ms vs {baseline * 1000:.0f} ms, ratio {ratio:.1f} "
        f"(target <= {target:g}) {verdict}"
    )
    return ratio <= target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs of each command")
    parser.add_argument("--runs", type=int, default=10_000, help="synthetic run directories")
    args = parser.parse_args()
    within = True

    with stopped_runs(50):
        listed = subprocess.run(
            [SSEBENCH_RUNS, "list", "--json"], capture_output=True, check=True
        ).stdout
        assert len(json.loads(listed)["runs"]) >= 50
        docker_ps = [
            shutil.which("docker") or "docker",
            "ps",
            "-a",
            "--filter",
            "label=ssebench.webui=true",
            "--format",
            "{{json .}}",
        ]
        times = median_seconds(
            {
                "baseline": docker_ps,
                "mounted": [SSEBENCH, "runs", "list", "--json"],
                "alone": [SSEBENCH_RUNS, "list", "--json"],
            },
            args.repeat,
        )
    baseline = times["baseline"]
    within &= report("ssebench runs list --json (50 runs)", times["mounted"], baseline, LIST_TARGET)
    report("ssebench-runs list --json (50 runs)", times["alone"], baseline, LIST_TARGET)

    with tempfile.TemporaryDirectory(prefix="runs-bench-") as folder:
        cwd = Path(folder)
        make_results(cwd / contract.HOST_RESULTS_ROOT, args.runs)
        found = subprocess.run(
            [SSEBENCH_RUNS, "results", "--json"], capture_output=True, check=True, cwd=cwd
        ).stdout
        assert len(json.loads(found)) == args.runs
        find = [
            "find",
            contract.HOST_RESULTS_ROOT,
            "-name",
            contract.SUMMARY_FILE,
            "-exec",
            "cat",
            "{}",
            "+",
        ]
        times = median_seconds(
            {
                "baseline": find,
                "mounted": [SSEBENCH, "runs", "results", "--json"],
                "alone": [SSEBENCH_RUNS, "results", "--json"],
            },
            args.repeat,
            cwd,
        )
    baseline = times["baseline"]
    name = f"ssebench runs results --json ({args.runs} runs)"
    within &= report(name, times["mounted"], baseline, RESULTS_TARGET)
    report(
        f"ssebench-runs results --json ({args.runs} runs)", times["alone"], baseline, RESULTS_TARGET
    )
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
