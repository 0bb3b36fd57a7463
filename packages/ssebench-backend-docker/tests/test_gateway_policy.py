"""What a run key may ask of the gateway (the module the proxy's hook imports)."""

from __future__ import annotations

import pytest

from ssebench.backends.docker._gateway_policy import (
    Shape,
    refused_parameter,
    refused_route,
    shape_of,
)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("POST", "/v1/chat/completions", True),
        ("POST", "/chat/completions", True),
        ("POST", "/v1/completions", True),
        ("GET", "/v1/models", True),
        ("GET", "/v1/chat/completions", False),
        ("POST", "/v1/models", False),
        ("POST", "/openai/deployments/other/chat/completions", False),
        ("POST", "/engines/other/chat/completions", False),
        ("POST", "/v1/embeddings", False),
        ("POST", "/key/generate", False),
        ("GET", "/model/info", False),
    ],
)
def test_a_run_key_reaches_the_chat_routes_and_its_model_list_only(
    method: str, path: str, allowed: bool
) -> None:
    assert (refused_route(method, path) is None) is allowed


@pytest.mark.parametrize(
    "name",
    [
        "fallbacks",
        "context_window_fallbacks",
        "mock_response",
        "mock_testing_fallbacks",
        "user_config",
        "api_base",
        "base_url",
        "api_key",
        "input_cost_per_token",
        "litellm_metadata",
        "metadata",
        "extra_headers",
        "timeout",
        "num_retries",
        "_hidden",
    ],
)
def test_a_parameter_of_litellms_is_refused_by_name(name: str) -> None:
    refused = refused_parameter({"model": "m", "messages": [], name: "x"})

    assert refused is not None and repr(name) in refused


def test_openais_parameters_pass() -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [],
        "tool_choice": "auto",
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
        "top_p": 1,
        "n": 2,
        "max_tokens": 10,
        "stop": ["x"],
        "seed": 1,
        "user": "u",
        "response_format": {"type": "text"},
        "parallel_tool_calls": False,
    }

    assert refused_parameter(body) is None


def test_a_calls_size_counts_n_best_of_and_each_prompt() -> None:
    assert shape_of({"messages": []}) == Shape(1, None, "max_tokens")
    assert shape_of({"n": 3, "max_tokens": 50}) == Shape(3, 50, "max_tokens")
    assert shape_of({"max_completion_tokens": 40, "max_tokens": 60}) == Shape(
        1, 40, "max_completion_tokens"
    )
    assert shape_of({"prompt": ["a", "b"], "best_of": 4, "n": 2}) == Shape(8, None, "max_tokens")
    assert shape_of({"prompt": [1, 2, 3]}) == Shape(1, None, "max_tokens")


@pytest.mark.parametrize("body", [{"n": 0}, {"n": "2"}, {"max_tokens": -1}, {"best_of": True}])
def test_a_size_that_is_not_a_positive_integer_is_refused(body: dict[str, object]) -> None:
    refused = shape_of(body)

    assert isinstance(refused, str) and "positive integer" in refused
