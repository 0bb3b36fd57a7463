"""The model gateway's cost: overhead per call and start time, measured in the same run.

    uv run python benchmarks/gateway_bench.py [--calls N] [--prompt-tokens T]

1. Overhead per call: a scripted model (`ssebench.runner.scripted`) answers
   chat completions on this host; N calls go to it directly and N through the
   gateway with a run key that has a budget (taking turns, after warm-up calls),
   each with a prompt of about T tokens (default 4,000), which the gateway counts
   to price the call's worst case before admitting it. Every prompt is new (its
   first words number the call): the gateway remembers the messages it counted,
   as an agent sends its conversation again with each call, and a prompt it has
   seen would measure that memory, not the count. Reported: both
   medians and their difference (target: <= 20 ms), and the gateway
   container's CPU time per call (from the engine's stats), which a loaded
   machine changes far less than it changes the latency; with the machine's
   load average, since this machine's cores are shared.
2. Start time: the gateway's container removed and started again; the seconds
   until its liveness route answers (the image already built).

With `--against TREE` (a git worktree of another commit, with its own `.venv`:
`git worktree add TREE REV && (cd TREE && uv sync --frozen --all-packages)`), that
tree's gateway runs beside this one, under its own registry prefix, started by its
own code; each round of calls goes direct, to this gateway and to that one, and
the overheads are printed side by side with their ratio.

Needs root, a Docker engine and the base image; uses its own gateway name
(`<registry>-gateway-bench`) and removes it afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import docker

from ssebench.backends.docker import DockerGateway, gateway_name
from ssebench.runner.scripted import ScriptedModel, load_script
from ssebench.spec import ModelEntry, ModelsFile

KEY_ENV = "SSEBENCH_BENCH_PROVIDER_KEY"
BASELINE_PREFIX = "ssebench-bench-baseline"

# Run by the other tree's own Python: its gateway, its image, its key store.
_BASELINE = r"""
import contextlib, json, sys
from pathlib import Path
import docker
from ssebench.backends.docker import DockerGateway, gateway_name
from ssebench.spec import load_models
client = docker.from_env()
gateway = DockerGateway(client, name=gateway_name() + "-bench")
if sys.argv[1] == "up":
    gateway.up(load_models(Path(sys.argv[2])))
    key = gateway.open_key("bench", ["scripted"], 1000.0)
    url = f"http://{gateway.host_address()}:4000"
    print(json.dumps({"url": url, "key": key, "name": gateway.name}))
else:
    gateway.down()
    with contextlib.suppress(docker.errors.APIError):
        client.api.remove_network(gateway.egress_network)
"""


def _baseline(tree: Path, *args: str) -> str:
    """Run the other tree's gateway code (`up MODELS_FILE` or `down`); its stdout."""
    env = {**os.environ, "SSEBENCH_REGISTRY": BASELINE_PREFIX, "SSEBENCH_HOME": str(tree)}
    env.pop("SSEBENCH_GATEWAY", None)
    done = subprocess.run(
        [str(tree / ".venv/bin/python"), "-c", _BASELINE, *args],
        env=env, cwd=tree, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the baseline tree's gateway failed ({args[0]}): {done.stderr[-2000:]}")
    return done.stdout


def _call(url: str, key: str, prompt: str) -> float:
    body = json.dumps({"model": "scripted", "messages": [{"role": "user", "content": prompt}]})
    request = urllib.request.Request(  # noqa: S310 (our own http:// URLs)
        f"{url}/v1/chat/completions",
        data=body.encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310
        answer.read()
        assert answer.status == 200
    return time.perf_counter() - started


def _cpu_ms(client: docker.DockerClient, name: str) -> float:
    """CPU time the container has used, in milliseconds."""
    stats = client.api.stats(name, stream=False)
    return float(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--prompt-tokens", type=int, default=4000)
    parser.add_argument("--against", type=Path, help="a worktree whose gateway runs beside")
    arguments = parser.parse_args()
    against: Path | None = arguments.against
    if against is not None and not (against / ".venv/bin/python").is_file():
        raise SystemExit(f"{against} has no .venv: run `uv sync --frozen --all-packages` there")
    calls = arguments.calls
    words = "word " * arguments.prompt_tokens  # about a token a word
    numbered = iter(range(10**9))

    def prompt() -> str:
        return f"call {next(numbered)}: {words}"

    os.environ[KEY_ENV] = "sk-bench-provider"
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "script.json"
        script.write_text(json.dumps({"replies": [{"content": "ok", "prompt_tokens": 10}]}))
        upstream = ScriptedModel(load_script(script), host="0.0.0.0").start()  # noqa: S104
    client = docker.from_env()
    gateway = DockerGateway(client, name=gateway_name() + "-bench")
    other: dict[str, str] = {}
    before: list[float] = []
    models_file = Path(tempfile.mkdtemp()) / "models.yaml"
    try:
        models = ModelsFile(
            models={
                "scripted": ModelEntry(
                    litellm={
                        "model": "openai/scripted",
                        "api_base": f"http://host.docker.internal:{upstream.port}/v1",
                        "input_cost_per_token": 1e-6,
                        "output_cost_per_token": 1e-6,
                    },
                    key_env=KEY_ENV,
                )
            }
        )
        if against is not None:
            # Only what every version's models file takes (later ones added fields).
            entry = models.models["scripted"]
            written = {"models": {"scripted": {"litellm": entry.litellm, "key_env": KEY_ENV}}}
            models_file.write_text(json.dumps(written))  # JSON is YAML
            other = json.loads(_baseline(against, "up", str(models_file)).splitlines()[-1])
        gateway.up(models)
        gateway.down(keep_config=True)
        started = time.monotonic()
        gateway.up(models)
        start_seconds = time.monotonic() - started
        proxy = f"http://{gateway.host_address()}:4000"
        direct = f"http://127.0.0.1:{upstream.port}"
        key = gateway.open_key("bench", ["scripted"], 1000.0)
        for _ in range(10):
            _call(proxy, key, prompt())
            _call(direct, "sk-bench-provider", prompt())
            if other:
                _call(other["url"], other["key"], prompt())
        via, straight = [], []
        load_before = os.getloadavg()[0]
        cpu_before = _cpu_ms(client, gateway.name)
        for _ in range(calls):
            via.append(_call(proxy, key, prompt()))
            straight.append(_call(direct, "sk-bench-provider", prompt()))
            if other:
                before.append(_call(other["url"], other["key"], prompt()))
        time.sleep(1)  # the calls' callbacks (spend) run just after each answer
        cpu_per_call = (_cpu_ms(client, gateway.name) - cpu_before) / calls
        load_after = os.getloadavg()[0]
        gateway.close_key("bench")
    finally:
        gateway.down()
        if against is not None:
            _baseline(against, "down")
        shutil.rmtree(models_file.parent)
        upstream.close()
        with contextlib.suppress(docker.errors.APIError):
            client.api.remove_network(gateway.egress_network)
    m_via, m_direct = statistics.median(via) * 1000, statistics.median(straight) * 1000
    print(f"calls: {calls} each way, new prompts of about {arguments.prompt_tokens} tokens")
    print(f"median direct:        {m_direct:8.2f} ms")
    print(f"median via gateway:   {m_via:8.2f} ms")
    print(f"overhead per call:    {m_via - m_direct:8.2f} ms (target <= 20 ms)")
    print(f"ratio:                {m_via / m_direct:8.2f}")
    print(f"gateway CPU per call: {cpu_per_call:8.2f} ms")
    cores = os.cpu_count()
    print(f"load average (1 min): {load_before:8.2f} before, {load_after:.2f} after, {cores} cores")
    print(f"gateway start:        {start_seconds:8.2f} s (container created until it answers)")
    if before:
        m_before = statistics.median(before) * 1000
        print(f"{against}'s gateway, in the same rounds:")
        print(f"  median via it:      {m_before:8.2f} ms")
        print(f"  overhead per call:  {m_before - m_direct:8.2f} ms")
        print(f"  this overhead / it: {(m_via - m_direct) / (m_before - m_direct):8.2f}")


if __name__ == "__main__":
    main()
