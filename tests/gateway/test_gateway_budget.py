"""Run keys and budgets through the real proxy, with the scripted model as the provider."""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ssebench.backends.docker import DockerGateway
from ssebench.runner.scripted import load_script

from .conftest import (
    CALL_COST,
    COMPLETION_TOKENS,
    MODEL,
    PROMPT,
    REPLY,
    Upstream,
    call_proxy,
    proxy_url,
)

pytestmark = pytest.mark.docker


def chat(
    gateway: DockerGateway, key: str, *, stream: bool = False, max_tokens: int | None = None
) -> tuple[int, str]:
    """One chat call through the proxy: its status and body."""
    body: dict[str, object] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": stream,
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return call_proxy(gateway, key, "/v1/chat/completions", body)


def run_id() -> str:
    return "gw-" + secrets.token_hex(4)


def test_a_run_key_reaches_the_model_streamed_or_not_and_is_counted(
    gateway: DockerGateway, upstream: Upstream
) -> None:
    run = run_id()
    key = gateway.open_key(run, [MODEL], 1.0)
    before = len(upstream.model.served.calls)

    plain = chat(gateway, key)
    streamed = chat(gateway, key, stream=True)

    assert plain[0] == 200 and REPLY in plain[1]
    assert streamed[0] == 200 and "data: " in streamed[1] and "scripted" in streamed[1]
    report = gateway.close_key(run)
    assert report is not None
    assert report.usage.calls == 2
    assert report.usage.prompt_tokens == 200 and report.usage.completion_tokens == 100
    assert report.spend == pytest.approx(2 * CALL_COST)
    # Both calls reached the provider with the provider's key, not the run's.
    calls = upstream.model.served.calls[before:]
    assert len(calls) == 2
    import hashlib

    expected = hashlib.sha256(f"Bearer {upstream.provider_key}".encode()).hexdigest()
    assert {call["auth_sha256"] for call in calls} == {expected}


def test_calls_stop_with_401_once_what_is_left_cannot_pay_for_one(gateway: DockerGateway) -> None:
    run = run_id()
    budget = 2.5 * CALL_COST
    key = gateway.open_key(run, [MODEL], budget)

    statuses = [chat(gateway, key, max_tokens=COMPLETION_TOKENS) for _ in range(4)]

    # Two calls cost 0.04 of 0.05; the prompt of a third alone costs more than is left.
    assert [status for status, _ in statuses] == [200, 200, 401, 401]
    assert "the run's budget of $0.05 is used up" in statuses[2][1]
    report = gateway.close_key(run)
    assert report is not None
    assert report.spend == pytest.approx(2 * CALL_COST)
    assert report.usage.refused_for_budget == 2


@pytest.mark.parametrize("at_once", [30, 1])
def test_spend_never_exceeds_a_budget_of_two_and_a_half_calls(
    gateway: DockerGateway, upstream: Upstream, at_once: int
) -> None:
    # One call costs 40 % of the budget: 30 calls at once, or one after another.
    run = run_id()
    budget = CALL_COST / 0.4
    key = gateway.open_key(run, [MODEL], budget)
    before = len(upstream.model.served.calls)

    with ThreadPoolExecutor(max_workers=at_once) as pool:
        answers = list(
            pool.map(lambda _: chat(gateway, key, max_tokens=COMPLETION_TOKENS), range(30))
        )

    report = gateway.close_key(run)
    assert report is not None
    statuses = [status for status, _ in answers]
    assert sorted(statuses) == [200] * 2 + [401] * 28, statuses
    assert all("used up" in text for status, text in answers if status == 401)
    assert report.spend <= budget + 1e-9
    assert report.spend == pytest.approx(2 * CALL_COST)
    assert report.usage.calls == 2 == len(upstream.model.served.calls) - before
    assert report.usage.refused_for_budget == 28


def test_a_call_without_max_tokens_gets_what_the_budget_leaves(
    gateway: DockerGateway, upstream: Upstream
) -> None:
    run = run_id()
    key = gateway.open_key(run, [MODEL], 0.02)
    before = len(upstream.model.served.calls)

    status, _ = chat(gateway, key)

    # 0.02 pays for the prompt (about 0.013) and some 35 tokens at 0.0002: the scripted
    # model's 50 were cut to what the gateway set, as a provider's are.
    assert status == 200
    served = upstream.model.served.calls[before:]
    assert len(served) == 1 and 20 < served[0]["usage"]["completion_tokens"] < 50
    report = gateway.close_key(run)
    assert report is not None and report.spend <= 0.02


def test_a_stream_its_client_drops_is_charged_its_worst_case_at_once(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"replies": [{"content": "word " * 200, "delay": 0.2}]}))
    scripted.model.use(load_script(slow))
    run = run_id()
    key = gateway.open_key(run, [MODEL], 1.0)
    body = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}], "stream": True}
    request = urllib.request.Request(
        f"{proxy_url(gateway)}/v1/chat/completions",
        data=json.dumps({**body, "max_tokens": 1000}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert b"data: " in answer.read1(64)
    # Dropped after its first chunk: 1000 tokens at 0.0002 and the prompt, at once.
    used = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        used = gateway.store.usage(run)
        if used is not None and used.spend > 0:
            break
        time.sleep(0.2)
    assert used is not None and used.spend >= 1000 * 2e-4 and used.calls == 1
    report = gateway.close_key(run)
    assert report is not None and report.spend == pytest.approx(used.spend)


def test_a_key_is_for_its_model_only_and_a_revoked_or_unknown_key_fails(
    gateway: DockerGateway,
) -> None:
    run = run_id()
    key = gateway.open_key(run, ["another-model"], 1.0)
    assert chat(gateway, key)[0] == 401
    gateway.close_key(run)
    run = run_id()
    key = gateway.open_key(run, [MODEL], 1.0)
    assert chat(gateway, key)[0] == 200
    gateway.close_key(run)

    status, body = chat(gateway, key)

    assert status == 401 and "not valid" in body
    assert chat(gateway, "sk-ssebench-" + secrets.token_urlsafe(32))[0] == 401


def test_spend_and_open_keys_survive_a_restart_of_the_proxy(gateway: DockerGateway) -> None:
    run = run_id()
    key = gateway.open_key(run, [MODEL], 1.0)
    assert chat(gateway, key)[0] == 200

    gateway.restart()

    assert chat(gateway, key)[0] == 200
    report = gateway.close_key(run)
    assert report is not None
    assert report.usage.calls == 2
    assert report.spend == pytest.approx(2 * CALL_COST)
