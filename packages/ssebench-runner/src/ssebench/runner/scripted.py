"""A scripted model: an OpenAI-compatible chat-completions server that replays a JSON script.

The demo and the tests use it as the provider behind the model gateway, so a
run exercises the whole path (key, budget, spend) without a paid model.
`ssebench models serve-script FILE` runs it. The script is a JSON object:

    {"replies": [{"content": "...", "prompt_tokens": 12, "completion_tokens": 5}, ...],
     "cycle": true}

A reply may also call tools, as an agent's model does: `"tool_calls": [{"name":
"bash", "arguments": {"command": "ls"}}]` (arguments an object or a JSON string);
the answer then carries them as OpenAI's `tool_calls` with `finish_reason`
"tool_calls".

Each call gets the next reply (from the start again with `cycle`, else 400
once the script is used up). A reply with `"when": "TEXT"` is not in that
sequence: it answers every call whose messages contain TEXT (an agent's side
calls, such as OpenCode's title call, which may come at any point), and the
sequence goes on undisturbed. A reply without token counts is counted at
about four characters a token; its completion tokens never exceed the call's
`max_tokens` (or `max_completion_tokens`), as a provider's never do. A reply with
`"delay": SECONDS` waits that long before it answers (streamed: before each piece);
one with `"status": CODE` answers that HTTP status with an OpenAI error instead (a
provider's 429 or 5xx). With `"max_in_flight": N` at the top, a call beyond N at once
is answered 429, as a rate-limited provider does.
`POST /v1/chat/completions` (and `/chat/completions`) answers as OpenAI does,
streamed as server-sent events when the request asks (`"stream": true`, the last
event carrying `usage`); `POST /v1/completions` answers with the reply as the
text (not streamed); `GET /v1/models` lists `model`. Standard library only
(and typing_extensions).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from typing_extensions import override

from ssebench.spec import UserError

CHAT_ROUTES: Final = ("/v1/chat/completions", "/chat/completions")
TEXT_ROUTES: Final = ("/v1/completions", "/completions")
"""Text completions: the reply's content as the text (not streamed)."""
MAX_BODY: Final = 8 << 20


@dataclass(frozen=True)
class Reply:
    """One scripted answer."""

    content: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()
    """Each call's tool name and its arguments, a JSON string."""
    when: str | None = None
    """Answer every call whose messages contain this text, outside the sequence."""
    delay: float = 0.0
    """Seconds to wait before answering (streamed: before each piece)."""
    status: int = 200
    """An HTTP status other than 200: answered with an error, as a failing provider does."""


@dataclass(frozen=True)
class Script:
    """The replies, in order."""

    replies: tuple[Reply, ...]
    cycle: bool = True
    max_in_flight: int | None = None
    """Calls answered at once; more are answered 429."""

    @property
    def sequence(self) -> tuple[Reply, ...]:
        """The replies given in order (those without `when`)."""
        return tuple(reply for reply in self.replies if reply.when is None)


def load_script(path: Path) -> Script:
    """Read a script file.

    Raises:
        UserError: it cannot be read, is not JSON, or has no replies; one line says which.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read the script {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise UserError(f"the script {path} is not JSON: {exc}") from exc
    replies = raw.get("replies") if isinstance(raw, dict) else None
    if not isinstance(replies, list) or not replies:
        raise UserError(f"the script {path} needs a non-empty list `replies`")
    parsed = []
    for index, reply in enumerate(replies):
        if not isinstance(reply, dict) or not isinstance(reply.get("content"), str):
            raise UserError(f"the script {path}: replies[{index}] needs a string `content`")
        counts = [reply.get("prompt_tokens"), reply.get("completion_tokens")]
        if any(c is not None and (not isinstance(c, int) or c < 0) for c in counts):
            raise UserError(f"the script {path}: replies[{index}] token counts must be integers")
        when = reply.get("when")
        if when is not None and (not isinstance(when, str) or not when):
            raise UserError(f"the script {path}: replies[{index}].when must be a non-empty string")
        delay = reply.get("delay", 0)
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay <= 600:
            raise UserError(f"the script {path}: replies[{index}].delay must be 0 to 600 seconds")
        status = reply.get("status", 200)
        if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
            raise UserError(f"the script {path}: replies[{index}].status must be 200 to 599")
        tools = _tool_calls(path, index, reply)
        parsed.append(
            Reply(reply["content"], counts[0], counts[1], tools, when, float(delay), status)
        )
    if all(reply.when is not None for reply in parsed):
        raise UserError(f"the script {path} needs at least one reply without `when`")
    most = raw.get("max_in_flight")
    if most is not None and (isinstance(most, bool) or not isinstance(most, int) or most < 1):
        raise UserError(f"the script {path}: max_in_flight must be a positive integer")
    return Script(tuple(parsed), cycle=bool(raw.get("cycle", True)), max_in_flight=most)


def _tool_calls(path: Path, index: int, reply: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    calls = reply.get("tool_calls", [])
    if not isinstance(calls, list):
        raise UserError(f"the script {path}: replies[{index}].tool_calls must be a list")
    parsed = []
    for call in calls:
        name = call.get("name") if isinstance(call, dict) else None
        arguments = call.get("arguments", {}) if isinstance(call, dict) else None
        if not isinstance(name, str) or not isinstance(arguments, dict | str):
            raise UserError(
                f"the script {path}: replies[{index}].tool_calls needs objects with a string "
                "`name` and `arguments` (an object or a JSON string)"
            )
        parsed.append((name, arguments if isinstance(arguments, str) else json.dumps(arguments)))
    return tuple(parsed)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


@dataclass
class Served:
    """What the server answered: each call's usage and a digest of its Authorization header."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ScriptedModel:
    """The server: `start()` in a thread, or `serve_forever()`."""

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = script
        self.served = Served()
        self._next = 0
        self._lock = threading.Lock()
        self.in_flight = 0
        model = self

        class Handler(_Handler):
            owner = model

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self.server.server_address[1])

    def use(self, script: Script) -> None:
        """Replay `script` from its first reply on, from the next call."""
        with self._lock:
            self.script = script
            self._next = 0

    def next_reply(self, text: str = "") -> Reply | None:
        """The reply for a call whose messages read `text`: the first `when` reply found in
        it, else the next of the sequence; None once a non-cycling script is used up."""
        for reply in self.script.replies:
            if reply.when is not None and reply.when in text:
                return reply
        with self._lock:
            index = self._next
            self._next += 1
        replies = self.script.sequence
        if index >= len(replies) and not self.script.cycle:
            return None
        return replies[index % len(replies)]

    def start(self) -> ScriptedModel:
        """Serve in a daemon thread; return self."""
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def serve_forever(self) -> None:
        """Serve until interrupted."""
        self.server.serve_forever()

    def close(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedModel
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the headers and the body go out in two writes; with Nagle the body
    # waits for the client's delayed ACK of the headers, 40 ms a call with aiohttp
    # (LiteLLM's client), which no real provider adds.
    disable_nagle_algorithm = True

    @override
    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the command prints one line per call itself

    def _send_json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(
                200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]}
            )
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        owner = self.owner
        with owner.served.lock:
            owner.in_flight += 1
            busy = owner.script.max_in_flight is not None and (
                owner.in_flight > owner.script.max_in_flight
            )
        try:
            if busy:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with owner.served.lock:
                    owner.served.calls.append({"status": 429, "usage": None})
                self._send_error(429, "rate limited: too many requests at once")
                return
            self._answer()
        finally:
            with owner.served.lock:
                owner.in_flight -= 1

    def _send_error(self, status: int, message: str) -> None:
        kind = "rate_limit_error" if status == 429 else "server_error"
        self._send_json(status, {"error": {"message": message, "type": kind}})

    def _answer(self) -> None:
        route = self.path.split("?")[0]
        if route not in CHAT_ROUTES + TEXT_ROUTES:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send_json(413, {"error": {"message": "request too large"}})
            return
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "the body is not JSON"}})
            return
        messages = request.get("messages") or []
        prompt_text = "".join(str(m.get("content") or "") for m in messages if isinstance(m, dict))
        if route in TEXT_ROUTES:
            prompt_text = str(request.get("prompt") or "")
        reply = self.owner.next_reply(prompt_text)
        if reply is None:
            self._send_json(400, {"error": {"message": "the script is used up"}})
            return
        if reply.status != 200:
            time.sleep(reply.delay)
            with self.owner.served.lock:
                self.owner.served.calls.append({"status": reply.status, "usage": None})
            self._send_error(reply.status, reply.content)
            return
        completion = (
            reply.completion_tokens
            if reply.completion_tokens is not None
            else _tokens(reply.content)
        )
        limits = [request.get(name) for name in ("max_completion_tokens", "max_tokens")]
        for limit in limits:
            if isinstance(limit, int) and limit > 0:
                completion = min(completion, limit)
        usage = {
            "prompt_tokens": reply.prompt_tokens
            if reply.prompt_tokens is not None
            else _tokens(prompt_text),
            "completion_tokens": completion,
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        auth = self.headers.get("Authorization") or ""
        with self.owner.served.lock:
            self.owner.served.calls.append(
                {"usage": usage, "auth_sha256": hashlib.sha256(auth.encode()).hexdigest()}
            )
        model = str(request.get("model") or "scripted")
        ident = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for name, arguments in reply.tool_calls
        ]
        if route in TEXT_ROUTES:
            time.sleep(reply.delay)
            text = {"index": 0, "text": reply.content, "finish_reason": "stop", "logprobs": None}
            answer = {"id": ident, "object": "text_completion", "created": created}
            self._send_json(200, {**answer, "model": model, "choices": [text], "usage": usage})
            return
        if request.get("stream"):
            self._stream(ident, created, model, reply, usage, calls)
            return
        time.sleep(reply.delay)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if calls:
            message["tool_calls"] = calls
        self._send_json(
            200,
            {
                "id": ident,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if calls else "stop",
                    }
                ],
                "usage": usage,
            },
        )

    def _stream(
        self,
        ident: str,
        created: int,
        model: str,
        reply: Reply,
        usage: dict[str, int],
        calls: list[dict[str, Any]],
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(delta: dict[str, Any], finish: str | None, **extra: object) -> None:
            chunk: dict[str, object] = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")

        event({"role": "assistant", "content": ""}, None)
        for piece in _pieces(reply.content):
            time.sleep(reply.delay)
            event({"content": piece}, None)
            self.wfile.flush()
        if calls:
            event({"tool_calls": [{"index": i, **call} for i, call in enumerate(calls)]}, None)
        event({}, "tool_calls" if calls else "stop")
        usage_chunk = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }
        self.wfile.write(b"data: " + json.dumps(usage_chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def _pieces(text: str) -> Sequence[str]:
    words = text.split(" ")
    return [word + (" " if i < len(words) - 1 else "") for i, word in enumerate(words)]
