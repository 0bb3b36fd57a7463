"""How `ssebench dataset verify -j 2` performs against the same runs one after the other.

    uv run python benchmarks/verify_bench.py [--rounds N]

Both commands verify the demo dataset (4 runs: reference and dummy on each
task) in a fresh folder, so neither skips a run as unchanged; `-j 1` is the
same runs in sequence. One warm-up verify builds the images first; then the
two take turns for --rounds rounds and the medians are compared (target:
ratio <= 0.7). Needs a Docker engine and the base image.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SSEBENCH = str(Path(sys.executable).parent / "ssebench")
HOME = Path(__file__).resolve().parents[1]
CHILD_ENV = {**os.environ, "SSEBENCH_HOME": str(HOME)}
TARGET = 0.7


def verify(jobs: int, cwd: Path) -> float:
    """Wall seconds of one `dataset verify -j jobs` in `cwd`; it must find both tasks sound."""
    cwd.mkdir(parents=True)
    begin = time.perf_counter()
    done = subprocess.run(
        [SSEBENCH, "dataset", "verify", "-j", str(jobs)],
        cwd=cwd,
        env=CHILD_ENV,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - begin
    if done.returncode != 0:
        raise SystemExit(f"dataset verify -j {jobs} failed:\n{done.stderr[-3000:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="ssebench-verify-bench-") as scratch:
        root = Path(scratch)
        verify(2, root / "warm")
        sequence, parallel = [], []
        for number in range(rounds):
            sequence.append(verify(1, root / f"j1-{number}"))
            parallel.append(verify(2, root / f"j2-{number}"))
    seq, par = statistics.median(sequence), statistics.median(parallel)
    ratio = par / seq
    verdict = "ok" if ratio <= TARGET else "OVER TARGET"
    print(
        f"dataset verify of the demo (4 runs): -j 2 {par:.1f} s vs -j 1 {seq:.1f} s, "
        f"ratio {ratio:.2f} (target <= {TARGET:g}) {verdict}"
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
