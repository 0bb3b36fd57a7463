# litellm and fastapi exist only in the gateway's image (requirements.lock), never in the
# workspace, so a type checker of the workspace cannot see them.
# mypy: disable-error-code="import-not-found"
"""SSEBench's LiteLLM hooks: run keys, budgets and spend without LiteLLM's database.

`custom_auth` (general_settings.custom_auth) admits a call: the bearer key must
be an open run key that names the requested model and whose budget is not used
up (a reservation is taken for the call). `handler` (litellm_settings.callbacks)
settles the reservation with the call's `response_cost` and token counts when
the call returns, or releases it when it fails. The state lives in
`ssebench_gateway_store` (a SQLite file on the state volume), because LiteLLM
imports this module twice. A used-up budget is answered with 401, which agents
do not retry (mini-swe-agent retries 403 and 422 for minutes).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException, Request
from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import UserAPIKeyAuth
from litellm.proxy.common_utils.http_parsing_utils import _read_request_body

if TYPE_CHECKING:  # the same file, under the name the image gives it
    from ssebench.backends.docker._gateway_store import KeyStore, Refusal, digest_of
else:
    from ssebench_gateway_store import KeyStore, Refusal, digest_of

STATE = Path(os.environ.get("SSEBENCH_GATEWAY_STATE", "/var/lib/ssebench-gateway/keys.db"))
"""The key store (a bind mount of the host's state folder)."""

RUN_ROUTES = frozenset(
    {"/chat/completions", "/v1/chat/completions", "/completions", "/v1/completions"}
)
"""The routes a run key may call: the model and nothing of the proxy's administration."""

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


async def custom_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    """Admit a call made with a run key, or refuse it with 401 and one line why."""
    if request.url.path not in RUN_ROUTES:
        raise HTTPException(
            status_code=401, detail="ssebench: run keys reach chat completions only"
        )
    body = await _read_request_body(request)
    model = body.get("model") if isinstance(body, dict) else None
    client = request.client.host if request.client is not None else None
    admitted = _store().admit(api_key or "", model if isinstance(model, str) else "", client)
    if isinstance(admitted, Refusal):
        raise HTTPException(status_code=401, detail=admitted.message)
    digest = digest_of(api_key)
    return UserAPIKeyAuth(
        api_key=digest, token=digest, metadata={_META: {"key": digest, "reservation": admitted}}
    )


def _ours(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    params = kwargs.get("litellm_params") or {}
    for holder in (params.get("metadata"), params.get("litellm_metadata")):
        if isinstance(holder, dict):
            found = (holder.get("user_api_key_metadata") or {}).get(_META)
            if isinstance(found, dict):
                return found
    return None


class _Spend(CustomLogger):  # type: ignore[misc]
    """Settles or releases each admitted call's reservation."""

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
        # A call refused after admission (an unknown model, a bad request) never
        # reaches the logging callbacks: release its reservation here.
        ours = (getattr(user_api_key_dict, "metadata", None) or {}).get(_META)
        if isinstance(ours, dict):
            with contextlib.suppress(Exception):
                _store().release(int(ours["reservation"]))


handler = _Spend()
