"""One line of an agent's `dialog.jsonl` (docs/agents.md): one model call, written on return."""

from __future__ import annotations

from typing import Any

import msgspec

from ssebench.spec._base import Message


class DialogUsage(Message, frozen=True):
    """The tokens one call used, as the provider counted them (None: not reported)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class DialogEntry(Message, frozen=True):
    """One model call of an agent, appended to `$SSE_ARCHIVE/dialog.jsonl` as it returns.

    An agent writes these itself (agents import nothing of SSEBench), so this type is
    the format's definition (`schemas/DialogEntry.json`) and what readers decode with.
    """

    timestamp: str
    """When the call returned, ISO 8601 with its offset."""
    model: str
    """The model the agent asked for."""
    messages: list[dict[str, Any]] = msgspec.field(default_factory=list)
    """The messages sent: all of them, or only those new since the previous call."""
    reply: str | None = None
    """The reply's text (None when it had none, or the call failed)."""
    tool_calls: list[dict[str, Any]] = msgspec.field(default_factory=list)
    """The tools the reply called, as the provider gave them."""
    usage: DialogUsage | None = None
    cost: float | None = None
    """US dollars, if the agent knows (the run's total is summary.json's `spend`)."""
    error: str | None = None
    """Why the call failed (a refused budget, a lost connection); then there is no reply."""
    first_message: int = 0
    """The index, in the request, of the first message of `messages` (0: all were given)."""
    status: int | None = None
    """The HTTP status the gateway answered, when the agent records it (401: refused)."""
    duration: float | None = None
    """Seconds the call took, when the agent records it."""
