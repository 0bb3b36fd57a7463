"""mini-swe-agent's glue to SSEBench (runs in /opt/agent/venv, imports nothing of /opt/ssebench).

- The task itself comes from `sse_daemon.py` (`python -m sse_daemon task`).
- `DialogModel` is mini-swe-agent's LiteLLM model pointed at the run's gateway
  (`SSE_BASE_URL`, `SSE_API_KEY` from the environment, never a command line) that
  appends one JSON line per model call to `$SSE_ARCHIVE/dialog.jsonl` as soon as
  the call returns (docs/agents.md), so an agent killed at its time limit loses none.
- `DaemonEnvironment` runs each command through the daemon's `bash` tool instead of
  a local shell: in sidecar mode the project's toolchain is in the task container.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any

import litellm
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel
from sse_daemon import daemon

litellm.suppress_debug_info = True  # its "Provider List" banner on each priced call


def _append(entry: dict[str, Any]) -> None:
    """One line to dialog.jsonl, written whole by one write() on an O_APPEND file."""
    line = (json.dumps(entry, default=str) + "\n").encode()
    path = Path(os.environ["SSE_ARCHIVE"]) / "dialog.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


class DialogModel(LitellmModel):
    """LitellmModel through the run's gateway, recording each call in dialog.jsonl."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["model_kwargs"] = {
            **kwargs.get("model_kwargs", {}),
            "api_base": os.environ["SSE_BASE_URL"],
            "api_key": os.environ["SSE_API_KEY"],
        }
        super().__init__(**kwargs)
        self._sent = 0  # messages already recorded: each entry carries only the new ones

    def _query(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        # A history that shrank (none does today) is recorded whole again.
        first = self._sent if self._sent <= len(messages) else 0
        new = messages[first:]
        try:
            response = super()._query(messages, **kwargs)
        except Exception as exc:
            _append(
                {
                    "timestamp": _now(),
                    "model": self.config.model_name,
                    "messages": new,
                    "first_message": first,
                    "error": f"{type(exc).__name__}: {exc}"[:2000],
                }
            )
            raise
        self._sent = len(messages)
        message = response.choices[0].message
        usage = getattr(response, "usage", None)
        _append(
            {
                "timestamp": _now(),
                "model": self.config.model_name,
                "messages": new,
                "first_message": first,
                "reply": message.content,
                "tool_calls": [call.model_dump() for call in message.tool_calls or []],
                "usage": {
                    "prompt_tokens": getattr(usage, "prompt_tokens", None),
                    "completion_tokens": getattr(usage, "completion_tokens", None),
                },
                "cost": None,  # the gateway prices calls; its total is summary.json's spend
            }
        )
        return response


class DaemonEnvironment(LocalEnvironment):
    """Each command through the daemon's one persistent `bash` shell (as `model`, in the tree)."""

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        command = action.get("command", "")
        if cwd:
            command = f"cd {json.dumps(cwd)} && {command}"
        try:
            done = daemon("POST", "/tool/bash?action=execute", {"command": command})
            output = {
                "output": done.get("stdout", "") + done.get("stderr", ""),
                "returncode": done.get("code", -1),
                "exception_info": "",
            }
        except Exception as exc:
            output = {
                "output": "",
                "returncode": -1,
                "exception_info": f"the daemon's bash tool failed: {exc}",
            }
        self._check_finished(output)
        return output
