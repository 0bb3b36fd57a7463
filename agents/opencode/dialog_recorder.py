"""A recording relay between the agent and the model gateway: `$SSE_ARCHIVE/dialog.jsonl`.

The agent (OpenCode) talks to this relay on the loopback as if it were the
gateway; each call goes on to `SSE_BASE_URL` unchanged (streamed answers are
passed on as they arrive), and when the answer is complete one line is appended
to dialog.jsonl (docs/agents.md, `ssebench.spec.DialogEntry`): the time, the model,
the messages new since the previous call, the reply, its tool calls, the token
usage, the cost the gateway reported, the HTTP status and, for a refused call,
the gateway's message. A line is written (and flushed) as its call returns, so
a killed agent loses nothing it had received.

Standard library only: it runs on the SSEBench runtime's interpreter with
`-I -S`, importing nothing of /opt/ssebench's packages.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 32 << 20
"""The largest request the relay passes on."""

COST_HEADER = "x-litellm-response-cost"
"""Where the gateway (LiteLLM) says what a call cost."""

PASSED_HEADERS = ("authorization", "content-type", "accept", "user-agent")
"""Request headers passed on to the gateway."""


class Recorder:
    """Appends one JSON line per call to `path`; remembers the last messages sent."""

    def __init__(self, path: str, on_refusal: Callable[[int, str], None]) -> None:
        self.path = path
        self.on_refusal = on_refusal
        self.lock = threading.Lock()
        self.previous: list[Any] = []
        self.calls = 0

    def new_messages(self, messages: list[Any]) -> tuple[int, list[Any]]:
        """The messages not sent before: those after the previous call's, when they start
        the same way (a conversation growing), else all of them (another conversation)."""
        with self.lock:
            previous, self.previous = self.previous, messages
        if previous and messages[: len(previous)] == previous:
            return len(previous), messages[len(previous) :]
        return 0, messages

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self.lock:
            self.calls += 1
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)


def _utc(moment: float) -> str:
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{int(moment % 1 * 1000):03d}Z"
    )


class _Reply:
    """The answer, taken from a JSON body or from a stream of chat-completion chunks."""

    def __init__(self) -> None:
        self.content = ""
        self.tool_calls: dict[int, dict[str, str]] = {}
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self._partial = b""

    def feed_stream(self, data: bytes) -> None:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                continue
            try:
                self.chunk(json.loads(payload))
            except ValueError:
                continue

    def chunk(self, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            return
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            self.content += delta.get("content") or ""
            for index, call in enumerate(delta.get("tool_calls") or []):
                slot = self.tool_calls.setdefault(
                    int(call.get("index", index)), {"id": "", "name": "", "arguments": ""}
                )
                function = call.get("function") or {}
                slot["id"] = call.get("id") or slot["id"]
                slot["name"] += function.get("name") or ""
                arguments = function.get("arguments") or ""
                slot["arguments"] += (
                    arguments if isinstance(arguments, str) else json.dumps(arguments)
                )
            self.finish = choice.get("finish_reason") or self.finish


def _openai(call: dict[str, str]) -> dict[str, Any]:
    """A tool call as OpenAI's API shows it."""
    return {
        "id": call["id"],
        "type": "function",
        "function": {"name": call["name"], "arguments": call["arguments"]},
    }


def _usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {name: usage.get(name) for name in ("prompt_tokens", "completion_tokens")}


def make_handler(upstream: str, recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    """A request handler passing each request on to `upstream` (`http://host:port`)."""
    target = urllib.parse.urlsplit(upstream)
    base_path = target.path.rstrip("/")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.relay(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.send_error(413)
                return
            self.relay(self.rfile.read(length))

        def relay(self, body: bytes | None) -> None:
            started = time.time()
            request: Any = {}
            if body:
                try:
                    request = json.loads(body)
                except ValueError:
                    request = {}
            headers = {k: v for k, v in self.headers.items() if k.lower() in PASSED_HEADERS}
            connection = http.client.HTTPConnection(
                target.hostname or "", target.port or 80, timeout=600
            )
            try:
                connection.request(self.command, base_path + self.path, body=body, headers=headers)
                answer = connection.getresponse()
            except OSError as exc:
                self.send_error(502, f"the gateway cannot be reached: {exc}")
                self.record(started, request, 502, None, f"the gateway cannot be reached: {exc}")
                return
            streamed = "text/event-stream" in (answer.getheader("Content-Type") or "")
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            reply = _Reply()
            if streamed:
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                while True:
                    data = answer.read1(65536)
                    if not data:
                        break
                    reply.feed_stream(data)
                    try:
                        self.wfile.write(data)
                        self.wfile.flush()
                    except OSError:
                        break
                text = None
            else:
                data = answer.read()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                text = data.decode("utf-8", errors="replace")
                with contextlib.suppress(ValueError):
                    reply.chunk(json.loads(data))
            connection.close()
            error = text[:2000] if text is not None and answer.status != 200 else None
            if self.command == "POST":
                self.record(
                    started, request, answer.status, reply, error, answer.getheader(COST_HEADER)
                )
            if answer.status == 401:  # the gateway's refusal: a spent budget, a revoked key
                recorder.on_refusal(answer.status, error or "")

        def record(
            self,
            started: float,
            request: Any,
            status: int,
            reply: _Reply | None,
            error: str | None,
            cost: str | None = None,
        ) -> None:
            messages = request.get("messages") if isinstance(request, dict) else None
            first, new = recorder.new_messages(messages if isinstance(messages, list) else [])
            entry: dict[str, Any] = {
                "timestamp": _utc(time.time()),
                "model": str(request.get("model") or "") if isinstance(request, dict) else "",
                "first_message": first,
                "messages": new,
                "reply": reply.content if reply else None,
                "tool_calls": [_openai(reply.tool_calls[i]) for i in sorted(reply.tool_calls)]
                if reply
                else [],
                "usage": _usage(reply.usage) if reply else None,
                "cost": None,
                "status": status,
                "error": error,
                "duration": round(time.time() - started, 3),
            }
            with contextlib.suppress(ValueError):
                entry["cost"] = float(cost) if cost else None
            recorder.write(entry)

    return Handler


def start(
    upstream: str, path: str, on_refusal: Callable[[int, str], None]
) -> tuple[ThreadingHTTPServer, Recorder]:
    """Serve the relay on a free loopback port in a daemon thread."""
    recorder = Recorder(path, on_refusal)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(upstream, recorder))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, recorder
