"""The model gateway's tests: one real proxy per session, a scripted model as its provider.

The scripted model (`ssebench.runner.scripted`) listens on every address of this
host; the proxy reaches it as `host.docker.internal`. Each call costs
`CALL_COST`: the script's usage (100 prompt, 50 completion tokens) times the
prices in the models file. The proxy is started once (it takes seconds) and
removed at the end with its network.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from ssebench.backends.docker import DockerGateway
from ssebench.runner.scripted import ScriptedModel, load_script
from ssebench.spec import MODELS_ENV, load_models, settings

PROMPT_TOKENS = 100
COMPLETION_TOKENS = 50
INPUT_PRICE = 1e-4
OUTPUT_PRICE = 2e-4
CALL_COST = PROMPT_TOKENS * INPUT_PRICE + COMPLETION_TOKENS * OUTPUT_PRICE  # 0.02
RESERVATION = CALL_COST
KEY_ENV = "SSEBENCH_TEST_PROVIDER_KEY"
MODEL = "scripted"
REPLY = "scripted reply: the bug is fixed"
KEY_ENV_B = "SSEBENCH_TEST_PROVIDER_KEY_B"
MODEL_B = "scripted-b"
"""A second model, behind its own scripted server and provider key: no run of MODEL's
may reach it."""
REPLY_B = "model B's own answer"
MODEL_FLAKY = "scripted-flaky"
"""Model A's server again, for tests that make it fail: one retry, 1 s a call."""
DEFAULT_BUDGET = 1000.0
"""A run's budget unless a test names one: the gateway prices each call's worst case
(the prompt as sent, 4,096 completion tokens at 0.0002), and the agents' prompts are
long, so the budget stops only the runs that test it."""
PROMPT = "the bug " * 60
"""A prompt LiteLLM's counter makes more than PROMPT_TOKENS, the scripted model's count:
the gateway's worst case for a call is then at least what the call costs."""
HOME = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Upstream:
    """The scripted model and the provider key the proxy must send it."""

    model: ScriptedModel
    provider_key: str


@pytest.fixture(scope="session", autouse=True)
def gateway_of_this_session() -> Iterator[str]:
    """A gateway of each test session's own (`SSEBENCH_GATEWAY`, which the `ssebench`
    commands the tests start inherit): the modules here run on several pytest-xdist
    workers at once, each with its own scripted model, so each needs its own proxy."""
    name = "ssebench-test-gateway-" + os.environ.get("PYTEST_XDIST_WORKER", "main")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(settings.GATEWAY.name, name)
        yield name


@pytest.fixture(scope="session")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    reply = {
        "content": REPLY,
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
    }
    script = tmp_path_factory.mktemp("scripted") / "script.json"
    yield from _serve(script, reply)


def _serve(script: Path, reply: dict[str, Any]) -> Iterator[Upstream]:
    script.write_text(json.dumps({"replies": [reply]}))
    model = ScriptedModel(load_script(script), host="0.0.0.0").start()
    yield Upstream(model=model, provider_key="sk-provider-" + secrets.token_hex(16))
    model.close()


@pytest.fixture(scope="session")
def upstream_b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    """Model B's scripted server."""
    reply = {"content": REPLY_B, "prompt_tokens": PROMPT_TOKENS, "completion_tokens": 5}
    yield from _serve(tmp_path_factory.mktemp("scripted-b") / "script.json", reply)


def _model_entry(name: str, upstream: Upstream, key_env: str, extra: str = "") -> str:
    return (
        f"  {name}:\n    litellm:\n"
        f"      model: openai/{name}\n"
        f"      api_base: http://host.docker.internal:{upstream.model.port}/v1\n"
        f"      input_cost_per_token: {INPUT_PRICE}\n"
        f"      output_cost_per_token: {OUTPUT_PRICE}\n"
        f"    key_env: {key_env}\n{extra}"
    )


@pytest.fixture(scope="session")
def models_file(
    tmp_path_factory: pytest.TempPathFactory, upstream: Upstream, upstream_b: Upstream
) -> Iterator[Path]:
    """A models.yaml naming both scripted models; SSEBENCH_MODELS and their keys set for the
    session."""
    path = tmp_path_factory.mktemp("models") / "models.yaml"
    path.write_text(
        f"budget: {DEFAULT_BUDGET}\nreservation: {RESERVATION}\nmodels:\n"
        + _model_entry(MODEL, upstream, KEY_ENV)
        + _model_entry(MODEL_B, upstream_b, KEY_ENV_B)
        + _model_entry(MODEL_FLAKY, upstream, KEY_ENV, "    retries: 1\n    timeout: 1\n")
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MODELS_ENV, str(path))
        patch.setenv(KEY_ENV, upstream.provider_key)
        patch.setenv(KEY_ENV_B, upstream_b.provider_key)
        yield path


@pytest.fixture(scope="session")
def gateway(
    docker_client: docker.DockerClient, base_image: str, models_file: Path
) -> Iterator[DockerGateway]:
    """The proxy, up once for the session (built from images/proxy/ if needed)."""
    models = load_models(models_file)
    found = DockerGateway(docker_client, reservation=models.reservation)
    found.down()  # a killed earlier session's: its models would be kept beside ours
    found.up(models)
    yield found
    found.down()
    with contextlib.suppress(docker.errors.NotFound):
        docker_client.api.remove_network(found.egress_network)


def proxy_url(gateway: DockerGateway) -> str:
    """Where this host reaches the proxy."""
    address = gateway.host_address()
    assert address, "the gateway has no address on its egress network"
    return f"http://{address}:4000"


def call_proxy(
    gateway: DockerGateway,
    key: str,
    route: str,
    body: dict[str, Any] | None = None,
    method: str = "POST",
) -> tuple[int, str]:
    """One request to the proxy with `key`: its status and body (a POST's body is {} at
    least)."""
    request = urllib.request.Request(
        f"{proxy_url(gateway)}{route}",
        data=None if body is None and method == "GET" else json.dumps(body or {}).encode(),
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


def ssebench() -> str:
    """The `ssebench` command of this environment."""
    script = Path(sys.executable).with_name("ssebench")
    return str(script if script.exists() else shutil.which("ssebench") or "ssebench")


@pytest.fixture
def scripted(upstream: Upstream) -> Iterator[Upstream]:
    """The session's scripted model, given back its own script after the test."""
    original = upstream.model.script
    yield upstream
    upstream.model.use(original)


@dataclass(frozen=True)
class AgentRun:
    """A real agent's run against the scripted model, as `ssebench run --json` left it."""

    summary: dict[str, Any]
    run_dir: Path
    calls: list[dict[str, Any]]
    """What the scripted model answered during the run (usage per call)."""
    dialog_lines: list[bytes]
    """The lines of the run's archive/dialog.jsonl (none without one)."""


def run_scripted_agent(
    upstream: Upstream, tmp_path: Path, agent: str, task: str, script: Path | None, *options: str
) -> AgentRun:
    """Run `agent` on `task` through the gateway while the scripted model replays `script`
    (None: the script it has)."""
    if script is not None:
        upstream.model.use(load_script(script))
    before = len(upstream.model.served.calls)
    run_id = f"{agent}-{secrets.token_hex(3)}"
    done = subprocess.run(
        [
            *(ssebench(), "run", "--task", task, "--agent", agent, "--run-id", run_id),
            *("--model", MODEL, "--json", *options),
        ],
        cwd=tmp_path,
        env={**os.environ, "SSEBENCH_HOME": str(HOME)},
        capture_output=True,
        text=True,
        timeout=2700,
        check=False,
    )
    run_dir = tmp_path / "results" / task / MODEL / agent / run_id
    assert done.returncode == 0, done.stderr[-3000:]
    dialog = run_dir / "archive" / "dialog.jsonl"  # an agent that calls no model has none
    lines = dialog.read_bytes().splitlines() if dialog.exists() else []
    return AgentRun(json.loads(done.stdout), run_dir, upstream.model.served.calls[before:], lines)


def priced(calls: list[dict[str, Any]]) -> float:
    """What `calls` cost at the models file's prices."""
    return sum(
        c["usage"]["prompt_tokens"] * INPUT_PRICE + c["usage"]["completion_tokens"] * OUTPUT_PRICE
        for c in calls
    )


def assert_spend_of_a_killed_run(run: AgentRun, gateway: DockerGateway) -> None:
    """The spend of a run the time limit killed mid-loop: what each settled call cost,
    plus, when the kill dropped a stream in flight, that call at its worst case (the
    gateway cannot know what the provider made of it), which is at least its price."""
    used = gateway.store.usage(run.summary["run_id"])
    assert used is not None and used.revoked
    assert run.summary["spend"] == pytest.approx(used.spend)
    settled = used.prompt_tokens * INPUT_PRICE + used.completion_tokens * OUTPUT_PRICE
    if settled == pytest.approx(priced(run.calls)):
        assert used.spend == pytest.approx(settled)
        return
    assert settled == pytest.approx(priced(run.calls[:-1])), "more than one call unsettled"
    assert used.calls == len(run.calls)
    assert used.spend - settled >= priced(run.calls[-1:]) - 1e-9


TEST_AGENTS = HOME / "tests" / "agents"
"""The test agents (model-caller, model-flooder, ...)."""


def run_cli(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 1500
) -> subprocess.CompletedProcess[str]:
    """`ssebench ARGS` in `tmp_path`, with the test agents on its agent path."""
    return subprocess.run(
        [ssebench(), *args],
        cwd=tmp_path,
        env={
            **os.environ,
            "SSEBENCH_AGENT_PATH": str(TEST_AGENTS),
            "SSEBENCH_HOME": str(HOME),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


INTEGRITY_AGENTS = HOME / "tests" / "integrity" / "agents"
PROBE_PYTHON = "$(command -v python3 || echo /opt/ssebench/bin/python3.11)"
"""A Python the agent's tools can run: the task's, else the runtime's."""


def bypass_probe() -> dict[str, str]:
    """The integrity suite's `bypass` probe, its files by name: `agent.py` runs it and
    writes what it got past into `$SSE_ARCHIVE/report.json`."""
    return {
        "ssehostile.py": (INTEGRITY_AGENTS / "_shared" / "ssehostile.py").read_text(),
        "agent.py": (INTEGRITY_AGENTS / "bypass" / "agent.py").read_text(),
    }


AGENT_PID1_ENVIRON = "/proc/1/environ"
"""Readable by the agent: PID 1 of its container is the launcher, running as model."""

OWN_GROUPS: tuple[list[int], ...] = ([], [1000])
"""The supplementary groups `model` may have where the agent runs: none, or its own."""


def assert_bypassed_nothing(report: dict[str, Any]) -> None:
    """What an agent's tools ran the bypass probe as: `model` with no other group; it read
    nothing protected, got 403 from every admin route, reached no address beyond the
    gateway (docs/integrity.md)."""
    identity = report["identity"]
    assert (identity["uid"], identity["gid"]) == (1000, 1000), identity
    # The engine starts the agent container as 1000:1000 and lists the primary group as a
    # supplementary one too: no group beyond model's own either way.
    assert identity["groups"] in OWN_GROUPS, identity
    assert identity["status_groups"] in [[str(g) for g in own] for own in OWN_GROUPS], identity
    assert identity["bash_tool_ids"] == "1000\n1000\n1000\n", identity
    not_read = ("denied", "missing")
    # The agent container's PID 1 is the launcher, model's own process with the
    # environment the agent is given (tests/integrity/test_bypass.py says the same).
    read = {path: how for path, how in report["direct"].items() if how not in not_read}
    read.pop(AGENT_PID1_ENVIRON, None)
    assert read == {}
    assert set(report["admin_routes"]) and all(
        answer["status"] == 403 for answer in report["admin_routes"].values()
    ), report["admin_routes"]
    network = report["network"]
    reached = {k: v for k, v in network.items() if "REACHED" in v or "refused" in v.lower()}
    assert reached == {} and network, network
