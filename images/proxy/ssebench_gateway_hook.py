# litellm and fastapi exist only in the gateway's image (requirements.lock), never in the
# workspace, so a type checker of the workspace cannot see them.
# mypy: disable-error-code="import-not-found"
"""SSEBench's LiteLLM hooks: run keys, budgets and spend without LiteLLM's database.

`custom_auth` (general_settings.custom_auth) admits a call. A run key reaches the
chat and completion routes (and GET /v1/models, listing its own models) with
OpenAI's parameters only, its model named in the body only
(`ssebench_gateway_policy`); the key must be open and name that model; the call's
worst case (its prompt counted with LiteLLM's token counter for the model, times
the completion tokens it may make, `n` counted) must fit what is left of the budget
(`ssebench_gateway_store`). `max_tokens` is set, or lowered, so that the completion
cannot overrun it. `handler` (litellm_settings.callbacks) checks again the model
LiteLLM is about to call, settles the reservation with the call's `response_cost`
and token counts when the call returns, releases it when it fails, and charges a
stream the client dropped at its worst case. The state lives in
`ssebench_gateway_store` (a SQLite file on the state volume), because LiteLLM
imports this module twice. A used-up budget is answered with 401, which agents do
not retry (mini-swe-agent retries 403 and 422 for minutes); what a run key may
never do is answered with 403.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import litellm
import yaml
from fastapi import HTTPException, Request
from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import UserAPIKeyAuth
from litellm.proxy.common_utils.http_parsing_utils import (
    _read_request_body,
    safe_set_request_parsed_body,
)

if TYPE_CHECKING:  # the same files, under the names the image gives them
    from ssebench.backends.docker._gateway_policy import (
        MODEL_ROUTES,
        Shape,
        refused_parameter,
        refused_route,
        shape_of,
    )
    from ssebench.backends.docker._gateway_store import Admitted, Cost, KeyStore, Refusal, digest_of
else:
    from ssebench_gateway_policy import (
        MODEL_ROUTES,
        Shape,
        refused_parameter,
        refused_route,
        shape_of,
    )
    from ssebench_gateway_store import Admitted, Cost, KeyStore, Refusal, digest_of

STATE = Path(os.environ.get("SSEBENCH_GATEWAY_STATE", "/var/lib/ssebench-gateway/keys.db"))
"""The key store (a bind mount of the host's state folder)."""

CONFIG = Path(os.environ.get("SSEBENCH_GATEWAY_CONFIG", "/run/ssebench-gateway/config.yaml"))
"""The proxy's configuration: each model's LiteLLM model and prices."""

DEFAULT_MAX_OUTPUT = 4096
"""The completion tokens a call may make on a model whose most LiteLLM does not know."""

DEFAULT_CONCURRENCY = 4
"""A run's calls in flight at once, where the configuration names no other."""

DEFAULT_FAILURES = 3
"""Calls in a row the provider must fail for a run to be the provider's failure."""

UPSTREAM_STATUSES = frozenset({408, 429})
"""A provider's failures below 500: it timed out, or it was over its limits."""

COUNTS_KEPT = 20_000
"""Token counts remembered (a message's digest and count each: a few MB at most)."""

WAIT_LIMIT = 300.0
"""Seconds a call waits for the calls in flight to leave room in the budget."""

_META = "ssebench"

_OTEL_LOGGER = "litellm.integrations.otel.logger"
if importlib.util.find_spec("opentelemetry.sdk") is None:
    # LiteLLM's auth imports its OpenTelemetry logger on every call (to route traces per
    # tenant) and swallows the ImportError: without opentelemetry-sdk, which the lock does
    # not install, the module is never cached, so each call loaded and ran it again
    # (about a fifth of the proxy's time per call in a profile). None in sys.modules makes
    # that import fail at once, as it would anyway.
    sys.modules.setdefault(_OTEL_LOGGER, None)  # type: ignore[arg-type]


_STORE = KeyStore(STATE)
"""This import's store (its connections stay open); the other import of this module has its own."""


def _store() -> KeyStore:
    return _STORE


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


_COUNTS: dict[bytes, int] = {}
"""Token counts already made, by a digest of the model and what was counted (oldest first)."""


class _Model:
    """What the hook needs of one model of the configuration."""

    def __init__(self, entry: Mapping[str, Any], policy: Mapping[str, Any]) -> None:
        self.name = str(entry["model_name"])
        self.concurrency = int(policy.get("concurrency") or DEFAULT_CONCURRENCY)
        self.provider_failures = int(policy.get("provider_failures") or DEFAULT_FAILURES)
        self.litellm = str((entry.get("litellm_params") or {}).get("model") or self.name)
        known: dict[str, Any] = {}
        with contextlib.suppress(Exception):  # a model LiteLLM does not know: ours or nothing
            known = dict(litellm.get_model_info(self.litellm))
        info = {**known, **(entry.get("model_info") or {})}
        self.input = float(info.get("input_cost_per_token") or 0.0)
        self.output = max(
            float(info.get("output_cost_per_token") or 0.0),
            float(info.get("output_cost_per_reasoning_token") or 0.0),
        )
        self.max_output = int(info.get("max_output_tokens") or DEFAULT_MAX_OUTPUT)

    def prompt_tokens(self, body: Mapping[str, Any]) -> int:
        """The call's prompt, as LiteLLM's token counter for the model counts it.

        Messages are counted one by one, each with its own overhead, so the sum is at
        least the whole's count; an agent sends its conversation again with each call,
        so a message already counted is not counted again (`_counted`)."""
        try:
            if "messages" in body:
                messages = body.get("messages") or []
                tools = body.get("tools")
                counted = sum(self._counted("messages", [message]) for message in messages)
                return counted + (self._counted("tools", tools) if tools else 0)
            prompt = body.get("prompt") or ""
            if isinstance(prompt, list) and all(isinstance(p, int) for p in prompt):
                return len(prompt)  # token IDs
            return self._counted("text", prompt)
        except Exception:
            # A shape the counter does not take: about two characters a token, more than
            # any tokenizer gives, so the worst case is still an upper bound.
            return len(json.dumps(body, default=str)) // 2 + 1

    def _counted(self, kind: str, value: Any) -> int:
        """LiteLLM's count of `value` as `kind` (messages, tools or text), remembered."""
        key = hashlib.sha256(f"{self.litellm}\0{kind}\0".encode() + _canonical(value)).digest()
        found = _COUNTS.get(key)
        if found is None:
            if kind == "text":
                found = int(litellm.token_counter(model=self.litellm, text=value))
            else:
                found = int(
                    litellm.token_counter(
                        model=self.litellm,
                        messages=value if kind == "messages" else [],
                        tools=value if kind == "tools" else None,
                        # Never fetch an image the agent names: count it by default size.
                        use_default_image_token_count=True,
                    )
                )
            if len(_COUNTS) >= COUNTS_KEPT:
                _COUNTS.pop(next(iter(_COUNTS)))
            _COUNTS[key] = found
        return found

    def cost(self, body: Mapping[str, Any], shape: Shape) -> Cost:
        """The call's worst case at this model's prices."""
        tokens = min(shape.max_tokens or self.max_output, self.max_output)
        if not (self.input or self.output):
            return Cost(max_tokens=tokens)
        prompt = self.prompt_tokens(body) * self.input * shape.completions
        return Cost(prompt=prompt, per_token=self.output * shape.completions, max_tokens=tokens)


@functools.cache
def _models() -> dict[str, _Model]:
    try:
        config: dict[str, Any] = yaml.safe_load(CONFIG.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}
    policies = (config.get("ssebench") or {}).get("models") or {}
    found = {}
    for entry in config.get("model_list") or []:
        model = _Model(entry, policies.get(entry["model_name"]) or {})
        found[model.name] = model
    return found


def _refuse(status: int, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail=message)


async def custom_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    """Admit a call made with a run key, or refuse it with one line why (403: never
    allowed; 401: this key, this model or this budget does not allow it)."""
    path = request.url.path
    refused = refused_route(request.method, path)
    if refused is not None:
        raise _refuse(403, refused)
    if request.url.query:
        raise _refuse(403, "ssebench: a run's call takes no query parameters")
    client = request.client.host if request.client is not None else None
    digest = digest_of(api_key or "")
    if path in MODEL_ROUTES:
        models = _store().check(api_key or "", client)
        if isinstance(models, Refusal):
            raise _refuse(401, models.message)
        return UserAPIKeyAuth(api_key=digest, token=digest, models=models)
    body = await _read_request_body(request)
    if not isinstance(body, dict):
        raise _refuse(400, "ssebench: the body must be a JSON object")
    refused = refused_parameter(body)
    if refused is not None:
        raise _refuse(403, refused)
    shape = shape_of(body)
    if isinstance(shape, str):
        raise _refuse(400, shape)
    model_name = body.get("model")
    model_name = model_name if isinstance(model_name, str) else ""
    model = _models().get(model_name)
    cost = model.cost(body, shape) if model is not None else Cost()
    cap = model.concurrency if model is not None else DEFAULT_CONCURRENCY
    admitted = await _admit(api_key or "", model_name, client, cost, cap)
    if cost.priced and admitted.max_tokens != shape.max_tokens:
        # The limit the worst case was priced with, also when the agent asked for none.
        safe_set_request_parsed_body(request, {**body, shape.field: admitted.max_tokens})
    return UserAPIKeyAuth(
        api_key=digest,
        token=digest,
        models=list(admitted.models),
        metadata={_META: {"key": digest, "reservation": admitted.reservation}},
    )


async def _admit(key: str, model: str, client: str | None, cost: Cost, cap: int) -> Admitted:
    """The call admitted, once the calls in flight leave room for it.

    Raises:
        HTTPException: 401 when the key or the budget refuses it; 429 when the run has
            `cap` calls in flight, or they held the budget for WAIT_LIMIT seconds.
    """
    deadline = time.monotonic() + WAIT_LIMIT
    while True:
        admitted = _store().admit(key, model, client, cost, cap)
        if isinstance(admitted, Refusal):
            raise _refuse(429 if admitted.concurrency else 401, admitted.message)
        if admitted is not None:
            return admitted
        if time.monotonic() > deadline:
            raise _refuse(429, "ssebench: the run's calls in flight hold the rest of its budget")
        await asyncio.sleep(0.05)


def _ours(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    params = kwargs.get("litellm_params") or {}
    for holder in (params.get("metadata"), params.get("litellm_metadata")):
        if isinstance(holder, dict):
            found = (holder.get("user_api_key_metadata") or {}).get(_META)
            if isinstance(found, dict):
                return found
    return None


def _upstream(error: Exception) -> bool:
    """Whether the provider failed the call: LiteLLM's own error for a provider's 429, 5xx,
    timeout or lost connection (never one the proxy raised for the request itself, which
    an agent could provoke at will)."""
    kinds = (
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.BadGatewayError,
    )
    status = getattr(error, "status_code", None)
    return (
        isinstance(error, kinds)
        and isinstance(status, int)
        and (status in UPSTREAM_STATUSES or status >= 500)
    )


def _admitted_by(user_api_key_dict: Any) -> dict[str, Any] | None:
    found = (getattr(user_api_key_dict, "metadata", None) or {}).get(_META)
    return found if isinstance(found, dict) else None


class _Spend(CustomLogger):  # type: ignore[misc]
    """Checks the model a call goes to; settles, releases or charges its reservation."""

    async def async_pre_call_hook(
        self, user_api_key_dict: UserAPIKeyAuth, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        # The model LiteLLM will call, after everything that may have named it.
        ours = _admitted_by(user_api_key_dict)
        allowed = getattr(user_api_key_dict, "models", None) or []
        if ours is not None and data.get("model") not in allowed:
            raise _refuse(401, f"ssebench: this run may use only {', '.join(allowed)}")
        return data

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: UserAPIKeyAuth, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        ours = _admitted_by(user_api_key_dict)
        ended = False
        try:
            async for chunk in response:
                yield chunk
            ended = True
        finally:
            if not ended and ours is not None:
                # The client dropped the stream: what the provider made of it is not
                # known here, so it costs its worst case.
                with contextlib.suppress(Exception):
                    _store().charge(int(ours["reservation"]))

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        ours = _ours(kwargs)
        if ours is None:
            return
        usage = getattr(response_obj, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = float(kwargs.get("response_cost") or 0.0)
        _store().settle(int(ours["reservation"]), str(ours["key"]), cost, prompt, completion)

    async def async_log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        ours = _ours(kwargs)
        if ours is not None:
            _store().release(int(ours["reservation"]))

    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: UserAPIKeyAuth,
        traceback_str: str | None = None,
    ) -> None:
        # A call refused after admission (an unknown model, a bad request) never reaches
        # the logging callbacks: release its reservation here. One the provider failed,
        # after LiteLLM's retries, is recorded as the provider's.
        ours = _admitted_by(user_api_key_dict)
        if ours is None:
            return
        status = getattr(original_exception, "status_code", None)
        with contextlib.suppress(Exception):
            if _upstream(original_exception) and isinstance(status, int):
                model = _models().get(str(request_data.get("model") or ""))
                _store().fail(
                    int(ours["reservation"]),
                    str(ours["key"]),
                    status,
                    str(getattr(original_exception, "llm_provider", "") or ""),
                    model.provider_failures if model is not None else DEFAULT_FAILURES,
                )
            else:
                _store().release(int(ours["reservation"]))


handler = _Spend()

# The token counter loads its encoding on first use (~0.2 s): not on a run's first call.
with contextlib.suppress(Exception):
    litellm.token_counter(model="gpt-4o", text="ssebench")
