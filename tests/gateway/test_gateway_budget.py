"""Run keys and budgets through the real proxy, with the scripted model as the provider."""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from ssebench.backends.docker import DockerGateway

from .conftest import CALL_COST, MODEL, REPLY, RESERVATION, Upstream, proxy_url

pytestmark = pytest.mark.docker


def chat(gateway: DockerGateway, key: str, *, stream: bool = False) -> tuple[int, str]:
    """One chat call through the proxy: its status and body."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    request = urllib.request.Request(
        f"{proxy_url(gateway)}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


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


def test_calls_stop_with_401_once_the_budget_is_used_up(gateway: DockerGateway) -> None:
    run = run_id()
    budget = 2.5 * CALL_COST
    key = gateway.open_key(run, [MODEL], budget)

    statuses = [chat(gateway, key) for _ in range(4)]

    # Admitted while spend < budget: after 0, 1 and 2 calls' cost; then refused.
    assert [status for status, _ in statuses] == [200, 200, 200, 401]
    assert "the run's budget of $0.05 is used up" in statuses[3][1]
    report = gateway.close_key(run)
    assert report is not None
    assert report.spend == pytest.approx(3 * CALL_COST)
    assert report.usage.refused_for_budget == 1


def test_parallel_calls_overshoot_the_budget_by_at_most_one_reservation(
    gateway: DockerGateway,
) -> None:
    run = run_id()
    budget = 4 * CALL_COST
    key = gateway.open_key(run, [MODEL], budget)

    with ThreadPoolExecutor(max_workers=12) as pool:
        statuses = [status for status, _ in pool.map(lambda _: chat(gateway, key), range(24))]

    report = gateway.close_key(run)
    assert report is not None
    assert statuses.count(401) > 0
    assert report.usage.calls == statuses.count(200)
    assert report.spend <= budget + RESERVATION + 1e-9
    assert report.spend == pytest.approx(statuses.count(200) * CALL_COST)


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


def test_a_run_key_reaches_nothing_of_the_proxy_but_chat_completions(
    gateway: DockerGateway,
) -> None:
    run = run_id()
    key = gateway.open_key(run, [MODEL], 1.0)
    try:
        for path in ("/key/generate", "/model/info", "/spend/logs", "/user/new"):
            request = urllib.request.Request(
                f"{proxy_url(gateway)}{path}",
                data=b"{}",
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code in (401, 403, 404, 405), path
    finally:
        gateway.close_key(run)


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
