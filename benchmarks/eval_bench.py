"""How `ssebench eval` and `ssebench report` perform, as ratios against same-run baselines.

    uv run python benchmarks/eval_bench.py [--part runs|report|both] [--repeat N]

1. `runs`: 8 reference runs (both demo tasks, 4 each) with `ssebench eval -j 4`,
   against the same 8 with `ssebench run` one after the other (target: wall
   ratio <= 0.6). Also the CPU time of the `ssebench` processes themselves
   per run (the containers' CPU is the engine's, not theirs): the evaluation
   layer's own cost. One warm-up run per task builds the images first.
   Needs a Docker engine and the base image.
2. `report`: `ssebench report --json` over an evaluation of 10,000 recorded
   runs (synthetic run directories and the eval.json naming them), against
   `ssebench runs results --json` over the same folders (target: ratio <= 3);
   medians of --repeat rounds after one warm-up each, the two commands taking turns.

The commands run as on an installed machine: with Python's bytecode cache.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ssebench.spec import EvalRecord, EvalSettings, EvalSlot, contract, encode_json

BIN = Path(sys.executable).parent
SSEBENCH = str(BIN / "ssebench")
HOME = Path(__file__).resolve().parents[1]
CHILD_ENV = {
    **{name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"},
    "SSEBENCH_HOME": str(HOME),
}
DEMO_TASKS = ("pyarchive-path-traversal", "tlvkit-heap-overflow")
RUNS_TARGET = 0.6
REPORT_TARGET = 3.0


def timed(argv: Sequence[str], cwd: Path) -> tuple[float, float]:
    """Run a command; its wall seconds and its own (and its children's) CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    begin = time.perf_counter()
    subprocess.run(
        argv,
        cwd=cwd,
        env=CHILD_ENV,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - begin
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def bench_runs() -> bool:
    with tempfile.TemporaryDirectory(prefix="ssebench-eval-bench-") as scratch:
        root = Path(scratch)
        for task in DEMO_TASKS:
            (root / "warm").mkdir(exist_ok=True)
            timed([SSEBENCH, "run", "--task", task, "--agent", "reference"], root / "warm")
        sequential = root / "sequential"
        sequential.mkdir()
        seq_wall = seq_cpu = 0.0
        for task in DEMO_TASKS:
            for _ in range(4):
                wall, cpu = timed(
                    [SSEBENCH, "run", "--task", task, "--agent", "reference"], sequential
                )
                seq_wall += wall
                seq_cpu += cpu
        together = root / "eval"
        together.mkdir()
        eval_wall, eval_cpu = timed(
            [SSEBENCH, "eval", "--agents", "reference", "--repeat", "4", "-j", "4"], together
        )
        report = json.loads(
            subprocess.run(
                [SSEBENCH, "report", "--json", str(next((together / "evals").iterdir()))],
                cwd=together,
                env=CHILD_ENV,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        outcomes = [row["outcome"] for row in report["runs"]]
    ratio = eval_wall / seq_wall
    verdict = "ok" if ratio <= RUNS_TARGET else "OVER TARGET"
    print(
        f"8 reference runs: eval -j 4 {eval_wall:.1f} s vs 8 x ssebench run {seq_wall:.1f} s, "
        f"ratio {ratio:.2f} (target <= {RUNS_TARGET:g}) {verdict}; outcomes {sorted(set(outcomes))}"
    )
    print(
        f"CPU of the ssebench processes per run: eval {eval_cpu / 8:.2f} s, "
        f"ssebench run {seq_cpu / 8:.2f} s (start-up included: once for eval, 8 times for run)"
    )
    return ratio <= RUNS_TARGET and outcomes == ["passed"] * 8


def _summary(task: str, agent: str, run_id: str, number: int) -> bytes:
    return json.dumps(
        {
            "task": task,
            "config": {
                "agent": agent,
                "model": "none",
                "mode": "sandbox",
                "backend": "docker",
                "difficulty": 2,
                "timeout": 3600,
                "egress": "restricted",
                "reference_run": agent == "reference",
                "keep": False,
            },
            "patch_result": {
                "status": "passed" if number % 3 else "failed",
                "build_success": True,
                "pov_passed": 2 if number % 3 else 1,
                "pov_total": 2,
                "func_test_success": True,
                "intent_test_success": None,
                "error_msg": None,
                "error_log": None,
            },
            "runtime_result": {
                "agent_duration": 100.0 + number % 50,
                "agent_timeout": False,
                "evaluator_timeout": False,
                "agent_exit_code": 0,
            },
            "run_id": run_id,
            "started_at": f"2025-01-01T00:{number // 60 % 60:02d}:{number % 60:02d}+00:00",
            "spend": 0.42,
            "outcome": "passed" if number % 3 else "failed",
        },
        indent=2,
    ).encode()


def make_evaluation(root: Path, count: int) -> Path:
    """`count` recorded runs (100 tasks x 5 agents x count/500 repeats) and their eval.json."""
    tasks = [f"task-{number:03d}" for number in range(100)]
    agents = ["reference", "dummy", "alpha", "beta", "gamma"]
    repeat = max(1, count // (len(tasks) * len(agents)))
    slots = []
    number = 0
    for task in tasks:
        for agent in agents:
            parent = root / "results" / task / "none" / agent
            for again in range(1, repeat + 1):
                run_id = f"20250101T{number:06d}Z-{secrets.token_hex(3)}"
                run_dir = parent / run_id
                (run_dir / "archive").mkdir(parents=True)
                (run_dir / contract.RESULT_FILE).write_text("{}")
                (run_dir / contract.SUMMARY_FILE).write_bytes(_summary(task, agent, run_id, number))
                slots.append(
                    EvalSlot(task=task, agent=agent, model="none", repeat=again, run_ids=[run_id])
                )
                number += 1
            (parent / "latest").symlink_to(run_id)
    record = EvalRecord(
        eval_id="bench",
        created_at="2025-01-01T00:00:00+00:00",
        settings=EvalSettings(
            dataset=str(root / "dataset"),
            tasks=tasks,
            agents=agents,
            models=["none"],
            mode="sandbox",
            difficulty=2,
            repeat=repeat,
            timeout=3600,
            check_timeout=1800,
            egress="restricted",
            backend="docker",
        ),
        results=str(root / "results"),
        slots=slots,
    )
    folder = root / "evals" / "bench"
    folder.mkdir(parents=True)
    (folder / "eval.json").write_bytes(encode_json(record))
    return folder


def bench_report(count: int, repeat: int) -> bool:
    with tempfile.TemporaryDirectory(prefix="ssebench-report-bench-") as scratch:
        root = Path(scratch)
        folder = make_evaluation(root, count)
        commands = {
            "report": [SSEBENCH, "report", "--json", str(folder)],
            "results": [SSEBENCH, "runs", "results", "--json", "--dir", str(root / "results")],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for argv in commands.values():
            timed(argv, root)
        for _ in range(repeat):
            for name, argv in commands.items():
                times[name].append(timed(argv, root)[0])
    ours, baseline = (statistics.median(times[name]) for name in ("report", "results"))
    ratio = ours / baseline
    verdict = "ok" if ratio <= REPORT_TARGET else "OVER TARGET"
    print(
        f"report --json over {count} runs: {ours * 1000:.0f} ms vs runs results --json "
        f"{baseline * 1000:.0f} ms, ratio {ratio:.2f} (target <= {REPORT_TARGET:g}) {verdict}"
    )
    return ratio <= REPORT_TARGET


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("runs", "report", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of the report part")
    parser.add_argument("--runs", type=int, default=10_000, help="recorded runs for the report")
    args = parser.parse_args()
    ok = True
    if args.part in ("report", "both"):
        ok &= bench_report(args.runs, args.repeat)
    if args.part in ("runs", "both"):
        ok &= bench_runs()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
