"""docs/gateway.md's table of routes, walked with a run key against the real proxy: a run
on model A reaches A alone, and model B's server never hears of it."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

import pytest

from ssebench.backends.docker import DockerGateway

from .conftest import HOME, MODEL, MODEL_B, REPLY, REPLY_B, Upstream, call_proxy

pytestmark = pytest.mark.docker

PROMPT = "the bug " * 40


@dataclass(frozen=True)
class Row:
    method: str
    route: str
    body: str
    answer: str

    @property
    def status(self) -> int:
        return int(self.answer.split(",")[0])


def table() -> list[Row]:
    """The rows of docs/gateway.md's routes table, B named by its model."""
    text = (HOME / "docs" / "gateway.md").read_text()
    found = re.search(r"<!-- routes-table -->\n(.*?)<!-- /routes-table -->", text, re.S)
    assert found, "docs/gateway.md lost its routes table"
    rows = []
    for line in found.group(1).splitlines()[2:]:
        method, route, body, answer = (cell.strip() for cell in line.strip("|").split("|"))
        route = route.strip("`").replace("=B", f"={MODEL_B}").replace("/B/", f"/{MODEL_B}/")
        rows.append(Row(method, route, body, answer))
    return rows


def body_of(label: str, upstream_b: Upstream) -> dict[str, Any] | None:
    """The request body a row names: `chat`, `text` or `none`, then changes to it."""
    base, *changes = [part.strip() for part in label.split(",")]
    if base == "none":
        return None
    body: dict[str, Any] = (
        {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}]}
        if base == "chat"
        else {"model": MODEL, "prompt": PROMPT}
    )
    b_url = f"http://host.docker.internal:{upstream_b.model.port}/v1"
    b_params = {"model": f"openai/{MODEL_B}", "api_base": b_url}
    b_deployment = {"model_name": MODEL, "litellm_params": b_params}
    made: dict[str, Any] = {
        "model B": {"model": MODEL_B},
        "fallbacks B": {"fallbacks": [MODEL_B]},
        "context_window_fallbacks B": {"context_window_fallbacks": [{MODEL: [MODEL_B]}]},
        "mock_response": {"mock_response": REPLY_B},
        "mock_testing_fallbacks": {"mock_testing_fallbacks": True, "fallbacks": [MODEL_B]},
        "user_config B": {"user_config": {"model_list": [b_deployment]}},
        "model_list B": {"model_list": [b_deployment]},
        "api_base B": {"api_base": b_url},
        "input_cost_per_token 0": {"input_cost_per_token": 0, "output_cost_per_token": 0},
        "metadata": {"metadata": {"tags": ["anything"]}},
        "n 0": {"n": 0},
    }
    for change in changes:
        body.update(made[change])
    return body


def test_every_route_answers_a_run_key_as_the_table_says_and_model_b_hears_nothing(
    gateway: DockerGateway, upstream: Upstream, upstream_b: Upstream
) -> None:
    run = "routes-" + secrets.token_hex(3)
    key = gateway.open_key(run, [MODEL], 1.0)
    b_before = len(upstream_b.model.served.calls)
    rows = table()
    assert len(rows) > 30
    try:
        answers, texts = {}, {}
        for row in rows:
            body = body_of(row.body, upstream_b)
            status, text = call_proxy(gateway, key, row.route, body, row.method)
            answers[f"{row.method} {row.route} [{row.body}]"] = status
            texts[f"{row.method} {row.route} [{row.body}]"] = text[:300]
            assert REPLY_B not in text, row
            if row.status == 200 and "A only" in row.answer:
                assert [m["id"] for m in json.loads(text)["data"]] == [MODEL], text
            elif status == 200 and row.body != "none":
                assert REPLY in text, (row, text[:300])
        expected = {f"{r.method} {r.route} [{r.body}]": r.status for r in rows}
        differing = {k: (v, texts[k]) for k, v in answers.items() if expected[k] != v}
        assert answers == expected, differing
    finally:
        gateway.close_key(run)
    assert upstream_b.model.served.calls[b_before:] == []
