"""What a run's key may ask of the model gateway: routes, parameters, and a call's size.

Standard library only: this file is also copied into the gateway's image, where the
LiteLLM hook (`images/proxy/ssebench_gateway_hook.py`) imports it as
`ssebench_gateway_policy`. LiteLLM reads more from a request than OpenAI's API
defines: a model in the query string overrides the body's, `fallbacks` calls other
models, `mock_*` answers without the provider, `api_base` or a price per token
changes where a call goes or what it costs. A run's key may send OpenAI's parameters
only, in the body only, on the routes an agent needs. `docs/gateway.md` has the table
of routes and answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

CHAT_ROUTES: Final = frozenset(
    {"/chat/completions", "/v1/chat/completions", "/completions", "/v1/completions"}
)
"""The routes a run key may call the model on (POST)."""

MODEL_ROUTES: Final = frozenset({"/models", "/v1/models"})
"""The routes that list models (GET): a run key sees its own models only."""

FORBIDDEN_PREFIXES: Final = ("mock_", "litellm_", "aws_", "vertex_", "azure", "_")
"""Parameters LiteLLM reads that no OpenAI request has, by their prefix."""

FORBIDDEN: Final = frozenset(
    {
        # Other models, deployments and routers.
        "fallbacks", "context_window_fallbacks", "content_policy_fallbacks", "max_fallbacks",
        "fallback_depth", "model_list", "user_config", "model_alias_map", "deployment_id",
        "specific_deployment", "engine", "model_group", "base_model", "order", "weight",
        "tags", "routing_strategy", "custom_llm_provider", "provider_specific_header",
        "auto_router_config", "adaptive_router_config", "complexity_router_config",
        "quality_router_config", "use_litellm_proxy", "use_in_pass_through",
        # Where a call goes, with which credentials, and what it is charged.
        "api_base", "base_url", "api_key", "api_version", "organization", "headers",
        "extra_headers", "extra_body", "extra_query", "region_name", "input_cost_per_token",
        "output_cost_per_token", "input_cost_per_second", "output_cost_per_second",
        "tiered_pricing", "cost_per_query", "model_info", "client_secret", "client_id",
        "tenant_id", "ssl_verify", "configurable_clientside_auth_params",
        # The gateway's own limits: retries, timeouts, budgets, caching, logging.
        "num_retries", "max_retries", "retry_policy", "retry_strategy", "timeout",
        "request_timeout", "stream_timeout", "force_timeout", "cooldown_time", "max_budget",
        "budget_duration", "max_parallel_requests", "rpm", "tpm", "cache", "caching",
        "no-log", "turn_off_message_logging", "guardrails", "metadata", "secret_fields",
        "proxy_server_request", "logger_fn", "callbacks", "success_callback",
        "failure_callback", "prompt_id", "prompt_variables", "prompt_version",
        "allowed_openai_params", "drop_params", "additional_drop_params",
    }
)  # fmt: skip
"""Parameters LiteLLM reads that no OpenAI request has (or that only its owner may set)."""

MAX_TOKEN_FIELDS: Final = ("max_completion_tokens", "max_tokens")
"""Where a request asks for at most so many completion tokens, the newer name first."""


def refused_route(method: str, path: str) -> str | None:
    """Why a run key may not call `method path`, or None if it may."""
    if method == "POST" and path in CHAT_ROUTES:
        return None
    if method == "GET" and path in MODEL_ROUTES:
        return None
    return f"ssebench: a run key reaches {', '.join(sorted(CHAT_ROUTES))} and GET /v1/models only"


def refused_parameter(body: Mapping[str, object]) -> str | None:
    """Why a call's body is refused (a parameter of LiteLLM's, not OpenAI's), or None."""
    for name in sorted(body):
        if name in FORBIDDEN or name.startswith(FORBIDDEN_PREFIXES):
            return f"ssebench: the parameter {name!r} is not allowed (OpenAI's parameters only)"
    return None


@dataclass(frozen=True)
class Shape:
    """How large a call may be: what the hook prices before the call is made."""

    completions: int
    """How many completions the call asks for (`n`, `best_of`, each prompt of a list)."""
    max_tokens: int | None
    """The completion tokens asked for at most, each (None: not asked)."""
    field: str
    """The parameter that holds (or will hold) the limit."""


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def shape_of(body: Mapping[str, object]) -> Shape | str:
    """The call's size from its body, or why the body is refused (one line)."""
    counts = {name: body.get(name) for name in ("n", "best_of")}
    for name, value in counts.items():
        if value is not None and _positive(value) is None:
            return f"ssebench: {name!r} must be a positive integer"
    completions = max(_positive(counts["n"]) or 1, _positive(counts["best_of"]) or 1)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and not all(isinstance(p, int) for p in prompt):
        completions *= len(prompt)  # a list of prompts: each gets its own completions
    asked: list[int] = []
    field = "max_tokens"
    for name in MAX_TOKEN_FIELDS:
        value = body.get(name)
        if value is None:
            continue
        if _positive(value) is None:
            return f"ssebench: {name!r} must be a positive integer"
        asked.append(_positive(value) or 0)
        field = name if len(asked) == 1 else field
    return Shape(completions, min(asked) if asked else None, field)
