"""The `review` plugin (after grading, as root, `llm`): the run's model compares the
agent's patch with the task's reference fix, through the run's own key.

It reads the agent's patch (`final.patch`) and the grade (`result.json`) from the
results directory, the reference fix from the daemon's admin socket (`GET
/reference/patch`), asks `SSE_MODEL_NAME` at `SSE_BASE_URL` with `SSE_API_KEY` (the
call counts against the run's budget), and writes `review.md` (the model's answer)
and `review.json` (model, grade, usage, the digests of both patches) to its folder.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import sys
import urllib.request
from pathlib import Path

from typing_extensions import override

LIMIT = 64 * 1024
"""Bytes of each patch the prompt carries at most."""

PROMPT = """You review a security fix. The task's reference fix and the agent's patch follow.
Say whether the agent's patch fixes the same vulnerability as the reference, what it does
differently, and any risk it introduces. Answer in a few short paragraphs.

Grade of the agent's patch: {status}

--- reference fix ---
{reference}
--- agent's patch ---
{patch}
"""


class UnixConnection(http.client.HTTPConnection):
    """HTTP over the daemon's admin socket."""

    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self.path = path

    @override
    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path)


def reference_patch() -> str:
    connection = UnixConnection(os.environ["SSE_ADMIN_SOCKET"])
    connection.request("GET", "/reference/patch")
    answer = connection.getresponse()
    body = answer.read()
    if answer.status != 200:
        raise RuntimeError(f"GET /reference/patch answered {answer.status}")
    return str(json.loads(body)["diff"])


def cut(text: str) -> str:
    data = text.encode()
    return text if len(data) <= LIMIT else data[:LIMIT].decode(errors="ignore") + "\n[cut]\n"


def main() -> int:
    results = Path(os.environ["SSE_RESULTS"])
    out = Path(os.environ["SSE_PLUGIN_OUT"])
    model = os.environ["SSE_MODEL_NAME"]
    try:
        patch = (results / "final.patch").read_text(errors="replace")
    except FileNotFoundError:
        patch = ""
    try:
        status = json.loads((results / "result.json").read_bytes())["patch_result"]["status"]
    except (OSError, ValueError, KeyError):
        status = "unknown"
    reference = reference_patch()
    prompt = PROMPT.format(status=status, reference=cut(reference), patch=cut(patch) or "(empty)")
    body = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    url = os.environ["SSE_BASE_URL"].rstrip("/") + "/v1/chat/completions"
    if not url.startswith(("http://", "https://")):
        raise RuntimeError(f"SSE_BASE_URL is not an HTTP URL: {url!r}")
    request = urllib.request.Request(  # noqa: S310 - checked above: the run's gateway
        url,
        data=json.dumps(body).encode(),
        headers={
            "Authorization": "Bearer " + os.environ["SSE_API_KEY"],
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=240) as answer:  # noqa: S310 - the run's gateway
        reply = json.loads(answer.read())
    text = reply["choices"][0]["message"]["content"] or ""
    (out / "review.md").write_text(text.rstrip() + "\n")
    record = {
        "model": model,
        "status": status,
        "usage": reply.get("usage"),
        "reference_sha256": hashlib.sha256(reference.encode()).hexdigest(),
        "patch_sha256": hashlib.sha256(patch.encode()).hexdigest(),
    }
    (out / "review.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"review: {len(text)} characters from {model}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
