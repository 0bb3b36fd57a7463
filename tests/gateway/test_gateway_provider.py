"""A provider's failures are the provider's: the gateway retries and records them, a run
they end is `infra_error` for the provider and retried, and an agent cannot make its
own failures look like the provider's (the real proxy, scripted models)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from ssebench.backends.docker import DockerGateway
from ssebench.runner.scripted import load_script

from .conftest import MODEL_FLAKY, PROMPT, Upstream, call_proxy, run_cli

pytestmark = pytest.mark.docker

TASK = "pyarchive-path-traversal"


def use_script(upstream: Upstream, folder: Path, script: dict[str, Any]) -> None:
    path = folder / f"script-{secrets.token_hex(3)}.json"
    path.write_text(json.dumps(script))
    upstream.model.use(load_script(path))


def chat(gateway: DockerGateway, key: str) -> int:
    body = {"model": MODEL_FLAKY, "messages": [{"role": "user", "content": PROMPT}]}
    return call_proxy(gateway, key, "/v1/chat/completions", {**body, "max_tokens": 50})[0]


def test_a_providers_429s_are_retried_recorded_and_mark_it_down_until_a_call_passes(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    use_script(scripted, tmp_path, {"replies": [{"content": "slow down", "status": 429}]})
    run = "prov-" + secrets.token_hex(3)
    key = gateway.open_key(run, [MODEL_FLAKY], 10.0)
    before = len(scripted.model.served.calls)

    statuses = [chat(gateway, key) for _ in range(3)]

    assert statuses == [429, 429, 429]
    # The gateway tried each call twice (its one retry) before the agent saw it fail.
    assert len(scripted.model.served.calls) - before == 6
    down = gateway.store.usage(run)
    assert down is not None and down.provider_down
    assert [status for status, _, _ in down.provider_errors] == [429, 429, 429]
    assert {provider for _, provider, _ in down.provider_errors} == {"openai"}
    # One call that passes: the provider is not down any more.
    use_script(scripted, tmp_path, {"replies": [{"content": "fine", "completion_tokens": 5}]})
    assert chat(gateway, key) == 200
    report = gateway.close_key(run)
    assert report is not None
    assert not report.usage.provider_down and len(report.usage.provider_errors) == 3
    assert report.usage.provider_errors[0].status == 429 and report.usage.calls == 1


def test_a_call_past_its_models_timeout_is_the_providers_failure(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    # scripted-flaky allows 1 s a call; this provider takes 20.
    use_script(scripted, tmp_path, {"replies": [{"content": "late", "delay": 20}]})
    run = "prov-" + secrets.token_hex(3)
    key = gateway.open_key(run, [MODEL_FLAKY], 10.0)

    status = chat(gateway, key)

    report = gateway.close_key(run)
    assert status == 408
    assert report is not None and [e.status for e in report.usage.provider_errors] == [408]
    assert report.spend == 0


FAILING = {
    "429": ({"content": "slow down", "status": 429}, 429),
    "hangs": ({"content": "late", "delay": 20}, 408),  # past scripted-flaky's 1 s
}


@pytest.mark.parametrize("failing", sorted(FAILING))
def test_a_run_its_provider_fails_is_infra_error_for_the_provider_and_retried(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path, failing: str
) -> None:
    reply, status = FAILING[failing]
    use_script(scripted, tmp_path, {"replies": [reply]})

    done = run_cli(
        tmp_path,
        *("eval", "--tasks", TASK, "--agents", "model-caller", "--models", MODEL_FLAKY),
        *("--retries", "1", "--timeout", "300", "--json"),
    )

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    (row,) = report["runs"]
    assert row["outcome"] == "infra_error" and row["attempts"] == 2
    (group,) = report["groups"]
    assert group["pass_rate"]["counted"] == 0  # neither passed nor failed
    summary = json.loads((Path(row["run_dir"]) / "summary.json").read_text())
    assert summary["reason"] == "provider"
    assert summary["patch_result"]["status"] == "failed"  # graded all the same
    usage = summary["usage"]
    assert usage["provider_down"] and usage["refused_for_concurrency"] == 0
    assert len(usage["provider_errors"]) == 10  # the model-caller's ten calls
    assert {error["status"] for error in usage["provider_errors"]} == {status}


def test_an_agent_that_floods_a_healthy_model_into_429s_stays_failed(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    # A healthy provider that answers one call at a time (and 429 to any beside it).
    reply = {"content": "fine", "completion_tokens": 5, "delay": 0.3}
    use_script(scripted, tmp_path, {"replies": [reply], "max_in_flight": 1})

    done = run_cli(
        tmp_path,
        *("run", "--task", TASK, "--agent", "model-flooder", "--model", MODEL_FLAKY),
        *("--timeout", "300", "--json"),
    )

    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    usage = summary["usage"]
    # 8 calls at once, three times: the gateway let at most 4 through at once (the
    # model's concurrency), the provider failed some of those; the run is the agent's.
    assert usage["refused_for_concurrency"] >= 3
    assert usage["provider_errors"], usage
    assert summary["outcome"] == "failed" and summary["reason"] is None
