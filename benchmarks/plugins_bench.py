"""What the shipped plugins add to a run, as ratios against the same run without them.

    uv run python benchmarks/plugins_bench.py [--part artifact|both|all] [--repeat N]

1. artifact: the reference run of pyarchive-path-traversal with `--plugin artifact`
   against the same run without plugins, --repeat pairs one right after the other,
   either first in turn; the median of the pairs' ratios (target: <= 1.10), with the
   ratio of the medians and the plugin's own time in the container beside it.
2. both: the same run with a model (`--model scripted`: a scripted model on this
   host behind the model gateway, so `review` has a model to ask) with `--plugin
   artifact --plugin review` against it without plugins; the added seconds and the
   ratios are reported (no target: the review's time is the model's).

Images are built (and, for part 2, the gateway started) by a warm-up run of each
kind first. Every run directory is made in a temporary folder and removed.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
SSEBENCH = str(BIN / "ssebench")
HOME = Path(__file__).resolve().parents[1]
TASK = "pyarchive-path-traversal"
ARTIFACT_TARGET = 1.10
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def one_run(
    workdir: Path, plugins: list[str], model: str, env: dict[str, str]
) -> tuple[float, float]:
    """Seconds one `ssebench run` of the reference agent takes, and the seconds its plugins
    ran (as the entrypoint measured them); it must pass, every plugin ok."""
    argv = [SSEBENCH, "run", "--task", TASK, "--agent", "reference", "--json"]
    argv += ["--run-id", "bench-" + secrets.token_hex(4)]
    for name in plugins:
        argv += ["--plugin", name]
    if model != "none":
        argv += ["--model", model]
    begin = time.perf_counter()
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - begin
    if done.returncode != 0:
        raise SystemExit(f"run failed ({' '.join(argv)}):\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout)
    bad = [r for r in summary["plugin_results"] if r["outcome"] != "ok"]
    if summary["outcome"] != "passed" or bad:
        raise SystemExit(f"run did not pass with every plugin ok: {summary['outcome']}, {bad}")
    return seconds, sum(r["duration"] or 0.0 for r in summary["plugin_results"])


def pairs(
    plugins: list[str], model: str, env: dict[str, str], repeat: int
) -> tuple[float, float, float]:
    """Median seconds with `plugins` and without, over `repeat` pairs (order alternating),
    and the median of each pair's ratio (the pair ran back to back: on a machine whose
    load changes from minute to minute, this is the steadier figure)."""
    times: dict[bool, list[float]] = {True: [], False: []}
    own: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ssebench-plugins-bench-") as folder:
        work = Path(folder)
        one_run(work, plugins, model, env)  # warm-up: images (and the gateway) ready
        one_run(work, [], model, env)
        for turn in range(repeat):
            order = (True, False) if turn % 2 == 0 else (False, True)
            for with_plugins in order:
                seconds, plugin_seconds = one_run(work, plugins if with_plugins else [], model, env)
                times[with_plugins].append(seconds)
                if with_plugins:
                    own.append(plugin_seconds)
    ratios = [ours / base for ours, base in zip(times[True], times[False], strict=True)]
    print(f"  with {'+'.join(plugins)}: {[round(t, 2) for t in times[True]]}")
    print(f"  without plugins: {[round(t, 2) for t in times[False]]}")
    print(f"  pair ratios: {[round(r, 3) for r in ratios]}")
    print(f"  the plugins' own time in the container: {[round(t, 3) for t in own]} s, "
          f"median {statistics.median(own) / statistics.median(times[False]):.3f} "
          "of a run without them")  # fmt: skip
    return (
        statistics.median(times[True]),
        statistics.median(times[False]),
        statistics.median(ratios),
    )


def bench_artifact(repeat: int) -> bool:
    env = {**CHILD_ENV, "SSEBENCH_HOME": str(HOME)}
    ours, base, ratio = pairs(["artifact"], "none", env, repeat)
    ok = ratio <= ARTIFACT_TARGET
    print(f"artifact: medians {ours:.2f} s vs {base:.2f} s (+{ours - base:.2f} s, "
          f"{ours / base:.3f}), median pair ratio {ratio:.3f} "
          f"(target <= {ARTIFACT_TARGET}) {'ok' if ok else 'OVER TARGET'}")  # fmt: skip
    return ok


def bench_both(repeat: int) -> bool:
    from ssebench.runner.scripted import ScriptedModel, load_script

    with tempfile.TemporaryDirectory(prefix="ssebench-plugins-model-") as folder:
        script = Path(folder) / "script.json"
        reply = {"content": "The patch fixes the same flaw.", "prompt_tokens": 100,
                 "completion_tokens": 20}  # fmt: skip
        script.write_text(json.dumps({"replies": [reply], "cycle": True}))
        # Every address: the gateway reaches it from its container as host.docker.internal.
        model = ScriptedModel(load_script(script), host="0.0.0.0").start()  # noqa: S104
        try:
            models = Path(folder) / "models.yaml"
            models.write_text(
                "budget: 1.0\nreservation: 0.001\nmodels:\n  scripted:\n    litellm:\n"
                "      model: openai/scripted\n"
                f"      api_base: http://host.docker.internal:{model.port}/v1\n"
                "      api_key: not-a-secret\n"
                "      input_cost_per_token: 0.000001\n      output_cost_per_token: 0.000002\n"
            )
            env = {**CHILD_ENV, "SSEBENCH_HOME": str(HOME), "SSEBENCH_MODELS": str(models)}
            ours, base, ratio = pairs(["artifact", "review"], "scripted", env, repeat)
        finally:
            model.close()
    print(f"artifact+review: medians {ours:.2f} s vs {base:.2f} s (+{ours - base:.2f} s), "
          f"median pair ratio {ratio:.3f} (reported, no target)")  # fmt: skip
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["artifact", "both", "all"], default="all")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    ok = True
    if args.part in ("artifact", "all"):
        ok = bench_artifact(args.repeat) and ok
    if args.part in ("both", "all"):
        ok = bench_both(args.repeat) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
