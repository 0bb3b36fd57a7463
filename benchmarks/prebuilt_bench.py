"""Start latency of `ssebench run --prebuilt` with the images already local, against a cached run.

    uv run python benchmarks/prebuilt_bench.py [--repeat N]

Starts Debian's docker-registry on a free loopback port (storage in a temporary
folder; scripts/setup-test-registry.sh installs it), publishes the dummy agent on
one demo task there with `ssebench images push`, then times, in pairs one right
after the other (in turns, either first), `ssebench run` invoked -> "starting
run" (images ready, the container about to start) for a normal run (every layer
cached: the builders' input checks) and a `--prebuilt` run (the image is local:
one registry round trip that compares the manifest and downloads nothing).
The figure is the median of the pairs' ratios, prebuilt / cached (target <= 1.1).

The images go under `<registry>/<your SSEBENCH_REGISTRY's last part>-bench`, so
several users of one engine stay apart; the registry is stopped and those names
removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
import docker.errors

from ssebench.spec import find_home

HOME = find_home(Path(__file__).resolve().parent)
SSEBENCH = str(Path(sys.executable).with_name("ssebench"))
TASK = "pyarchive-path-traversal"
AGENT = "dummy"
TARGET = 1.1
MARK = "starting run"


@contextmanager
def registry(folder: Path) -> Iterator[str]:
    """docker-registry on 127.0.0.1:<free port>; yields its host, stops it at the end."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    config = folder / "config.yml"
    config.write_text(
        "version: 0.1\nlog: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {folder / 'storage'}}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
    )
    process = subprocess.Popen(
        ["docker-registry", "serve", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    host = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://{host}/v2/", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit("docker-registry did not come up") from None
                time.sleep(0.2)
        yield host
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def until_start(workdir: Path, env: dict[str, str], *options: str) -> float:
    """Seconds from invoking `ssebench run` until it says it is starting the container."""
    run_id = f"bench-prebuilt-{secrets.token_hex(4)}"
    argv = [SSEBENCH, "run", "--task", TASK, "--agent", AGENT, "--run-id", run_id, *options]
    seen: list[float] = []
    started = time.perf_counter()
    cli = subprocess.Popen(
        argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert cli.stdout is not None

    def read() -> None:
        assert cli.stdout is not None
        for line in cli.stdout:
            if not seen and MARK in line:
                seen.append(time.perf_counter() - started)

    reader = threading.Thread(target=read)
    reader.start()
    cli.wait()
    reader.join()
    if not seen:
        raise SystemExit(f"`{' '.join(argv)}` never said {MARK!r} (status {cli.returncode})")
    return seen[0]


def pairs(scratch: Path, prefix: str, repeat: int) -> tuple[list[float], list[float]]:
    """Publish under `prefix`, then `repeat` pairs of (cached run, prebuilt run) start times."""
    env = {**os.environ, "SSEBENCH_HOME": str(HOME), "SSEBENCH_REGISTRY": prefix}
    env.pop("SSEBENCH_PREBUILT", None)
    print(f"publishing {AGENT} on {TASK} to {prefix}")
    subprocess.run(
        [SSEBENCH, "images", "push", "--tasks", TASK, "--agents", AGENT],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workdir = scratch / "runs"
    workdir.mkdir()
    cached, prebuilt = [], []
    for index in range(repeat):
        if index % 2:
            prebuilt.append(until_start(workdir, env, "--prebuilt"))
            cached.append(until_start(workdir, env))
        else:
            cached.append(until_start(workdir, env))
            prebuilt.append(until_start(workdir, env, "--prebuilt"))
    return cached, prebuilt


def remove_prefix(prefix: str) -> None:
    """Remove every image name under the benchmark's own prefix (its port is new each time)."""
    client = docker.from_env()
    try:
        for image in client.images.list():
            for tag in image.tags:
                if tag.startswith(prefix + "/"):
                    with contextlib.suppress(docker.errors.APIError):
                        client.images.remove(tag)
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="pairs of runs (default 5)")
    args = parser.parse_args()
    own = (os.environ.get("SSEBENCH_REGISTRY") or "ssebench").rsplit("/", 1)[-1]
    with tempfile.TemporaryDirectory() as scratch, registry(Path(scratch)) as host:
        prefix = f"{host}/{own}-bench"
        try:
            cached, prebuilt = pairs(Path(scratch), prefix, args.repeat)
        finally:
            remove_prefix(prefix)
    ratios = [p / c for p, c in zip(prebuilt, cached, strict=True)]
    ratio = statistics.median(ratios)
    medians = statistics.median(cached), statistics.median(prebuilt)
    print(
        f"start latency (invoked -> {MARK!r}), medians of {args.repeat}: "
        f"cached run {medians[0]:.2f}s, --prebuilt {medians[1]:.2f}s"
    )
    print(
        f"ratio {ratio:.2f} (median of the pairs' {min(ratios):.2f}-{max(ratios):.2f}; "
        f"target <= {TARGET})"
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
