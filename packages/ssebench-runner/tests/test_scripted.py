"""The scripted model: OpenAI-compatible chat completions replaying a script, on a real socket."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssebench.runner.scripted import ScriptedModel, load_script
from ssebench.spec import UserError


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ScriptedModel]:
    script = tmp_path / "script.json"
    replies = [
        {"content": "first answer", "prompt_tokens": 7, "completion_tokens": 3},
        {"content": "second answer here"},
    ]
    script.write_text(json.dumps({"replies": replies, "cycle": False}))
    model = ScriptedModel(load_script(script)).start()
    yield model
    model.close()


def post(model: ScriptedModel, body: dict[str, object]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{model.port}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-x"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_replies_come_in_order_with_usage_then_the_script_is_used_up(
    served: ScriptedModel,
) -> None:
    messages = [{"role": "user", "content": "x" * 40}]
    status, body = post(served, {"model": "m", "messages": messages})
    first = json.loads(body)
    assert status == 200
    assert first["choices"][0]["message"] == {"role": "assistant", "content": "first answer"}
    assert first["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}

    status, body = post(served, {"model": "m", "messages": messages, "stream": True})
    events = [line[6:] for line in body.decode().splitlines() if line.startswith("data: ")]
    assert status == 200 and events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "second answer here"
    # Counted at about four characters a token when the script gives no counts.
    assert chunks[-1]["usage"] == {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}

    assert post(served, {"model": "m", "messages": messages})[0] == 400
    assert len(served.served.calls) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "is not JSON"),
        ('{"replies": []}', "needs a non-empty list `replies`"),
        ('{"replies": [{"text": "x"}]}', "replies[0] needs a string `content`"),
        ('{"replies": [{"content": "x", "prompt_tokens": -1}]}', "must be integers"),
        ('{"replies": [{"content": "x", "tool_calls": {}}]}', "tool_calls must be a list"),
        ('{"replies": [{"content": "x", "tool_calls": [{"name": 1}]}]}', "a string `name`"),
    ],
)
def test_a_bad_script_is_refused_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(text)

    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_script(script)


def test_a_reply_calls_tools_as_openai_does_streamed_or_not(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    call = {"name": "bash", "arguments": {"command": "ls -la"}}
    replies = [{"content": "let me look", "tool_calls": [call]}]
    script.write_text(json.dumps({"replies": replies}))
    model = ScriptedModel(load_script(script)).start()
    try:
        messages = [{"role": "user", "content": "fix it"}]
        status, body = post(model, {"model": "m", "messages": messages})
        choice = json.loads(body)["choices"][0]
        assert status == 200 and choice["finish_reason"] == "tool_calls"
        (called,) = choice["message"]["tool_calls"]
        assert called["type"] == "function" and called["id"].startswith("call_")
        assert called["function"] == {"name": "bash", "arguments": '{"command": "ls -la"}'}

        status, body = post(model, {"model": "m", "messages": messages, "stream": True})
        events = [line[6:] for line in body.decode().splitlines() if line.startswith("data: ")]
        chunks = [json.loads(event) for event in events[:-1]]
        deltas = [c["choices"][0] for c in chunks if c["choices"]]
        streamed = [d["delta"]["tool_calls"] for d in deltas if "tool_calls" in d["delta"]]
        assert streamed == [[{"index": 0, **called, "id": streamed[0][0]["id"]}]]
        assert deltas[-1]["finish_reason"] == "tool_calls"

        model.use(load_script(script))  # from the first reply again
        assert json.loads(post(model, {"model": "m", "messages": messages})[1])["choices"]
    finally:
        model.close()


def test_a_when_reply_answers_every_side_call_without_disturbing_the_sequence(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.json"
    replies = [
        {"when": "title generator", "content": "A title"},
        {"content": "first"},
        {"content": "second"},
    ]
    script.write_text(json.dumps({"replies": replies, "cycle": False}))
    model = ScriptedModel(load_script(script)).start()
    title = [{"role": "system", "content": "You are a title generator."}]
    work = [{"role": "user", "content": "fix it"}]
    try:
        answers = [
            post(model, {"model": "m", "messages": messages})
            for messages in (work, title, title, work, title)
        ]
        texts = [json.loads(body)["choices"][0]["message"]["content"] for _, body in answers]
        assert texts == ["first", "A title", "A title", "second", "A title"]
        assert post(model, {"model": "m", "messages": work})[0] == 400
    finally:
        model.close()


@pytest.mark.parametrize(
    ("replies", "message"),
    [
        ([{"content": "x", "when": ""}, {"content": "y"}], r"replies\[0\].when must be"),
        ([{"content": "x", "when": "title"}], "at least one reply without `when`"),
    ],
)
def test_a_bad_when_is_refused_in_one_line(
    tmp_path: Path, replies: list[dict[str, object]], message: str
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": replies}))

    with pytest.raises(UserError, match=message):
        load_script(script)
