"""Runs OpenCode headless on the task, through the dialog recorder, within the run's time.

Started by run.sh as `model` in the task's source tree, on the SSEBench runtime's
interpreter with `-I -S` (standard library only; nothing of /opt/ssebench is
imported). It:

1. reads the task from the daemon's `GET /project` (agent socket) and writes the prompt;
2. starts the dialog recorder (`dialog_recorder.py`) between OpenCode and the gateway;
3. writes OpenCode's configuration: one provider (`@ai-sdk/openai-compatible`, bundled
   in the binary) whose `baseURL`/`apiKey` read `{env:SSE_BASE_URL}`/`{env:SSE_API_KEY}`
   (the recorder's address, the run's key), the run's model, and the MCP server of
   the run (`test_patch`, named `ssebench_test_patch` for the model);
4. starts `opencode serve` on port 4096 (every address of the container) and `opencode
   run --attach` to it, so the session lives in a server a person can reach while the
   agent works (`ssebench runs endpoint RUN 4096`, HTTP basic auth as `opencode` with
   the password in `$SSE_ARCHIVE/opencode-server.json`, made for this run only: the
   daemon's port aside, a run's network holds only the gateway, but an open-egress
   run shares a bridge with other containers);
5. ends both when OpenCode finishes, or when the gateway refuses a call (401: the
   run's budget is spent), whichever comes first.

The run's `TIMEOUT` is the entrypoint's: it kills every process of `model` then
(exit 124, outcome `agent_timeout`). Nothing is lost by that kill: the recorder
has appended each call as it returned.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import dialog_recorder

AGENT_DIR = Path(__file__).parent
PORT = 4096
"""OpenCode's server port (the earlier SSEBench's web UI showed this session)."""
HOST = "0.0.0.0"  # noqa: S104 (the point: see the module docstring)
"""The server listens on every address, so `ssebench runs endpoint` reaches it."""
USERNAME = "opencode"
MCP_URL = os.environ.get("SSE_MCP_URL") or "http://127.0.0.1:3000/mcp"
"""The MCP server as the run gives it (the checker's, on the loopback the pair shares)."""
"""The server's basic-auth user (OpenCode's default)."""
REFUSAL_GRACE = 2.0
"""Seconds OpenCode gets to finish on its own after the gateway refused a call."""
SERVER_START = 240.0
"""Seconds `opencode serve` may take to listen: about 5 on an idle machine, but more than
60 on a loaded one (an evaluation's runs side by side on few cores; seen in the test
suite), where a shorter wait failed runs the model had nothing to do with. The run's
timeout bounds it anyway."""


STARTED = time.monotonic()


def say(text: str) -> None:
    print(f"opencode agent [{time.monotonic() - STARTED:6.1f} s]: {text}", flush=True)


class UnixConnection(http.client.HTTPConnection):
    """HTTP over the daemon's agent socket."""

    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=60)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(60)
        sock.connect(self.socket_path)
        self.sock = sock


def project() -> dict[str, Any]:
    """The task as the daemon shows it to the agent (`GET /project`)."""
    connection = UnixConnection(os.environ.get("SSE_DAEMON_SOCKET", "/tmp/sse.sock"))
    connection.request("GET", "/project")
    answer = connection.getresponse()
    body = answer.read()
    if answer.status != 200:
        raise SystemExit(f"opencode agent: GET /project answered {answer.status}: {body[:200]!r}")
    found: dict[str, Any] = json.loads(body)
    return found


def prompt(task: dict[str, Any]) -> str:
    """What OpenCode is asked to do."""
    description = task.get("task_description") or {}
    parts = [
        f"You are fixing a security vulnerability in {task['project']} ({task['language']}), "
        f"whose source tree is the current directory, {task['source']}.",
    ]
    if description.get("issue"):
        parts.append("The issue:\n" + description["issue"])
    for report in description.get("crash_report") or []:
        parts.append("A crash report:\n" + report)
    if description.get("bug_description"):
        parts.append("The bug:\n" + description["bug_description"])
    parts.append(
        "Fix the vulnerability in the source tree without breaking the project's behaviour. "
        "The tool ssebench_test_patch builds and tests your current tree as far as this run "
        "allows; use it to check your fix. Stop when the fix is done."
    )
    return "\n\n".join(parts)


def binary() -> str:
    """The platform binary: the baseline build on a CPU without AVX2 (as OpenCode's own
    installer chooses)."""
    try:
        avx2 = " avx2 " in " " + Path("/proc/cpuinfo").read_text().replace("\n", " ") + " "
    except OSError:
        avx2 = False
    name = "opencode" if avx2 else "opencode-baseline"
    return str(AGENT_DIR / "bin" / name)


def config(model: str) -> dict[str, Any]:
    """OpenCode's configuration for this run."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "sse": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "SSEBench gateway",
                "options": {"baseURL": "{env:SSE_BASE_URL}/v1", "apiKey": "{env:SSE_API_KEY}"},
                "models": {model: {"name": model}},
            }
        },
        "model": f"sse/{model}",
        "small_model": f"sse/{model}",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
        "mcp": {"ssebench": {"type": "remote", "url": MCP_URL, "enabled": True}},
    }


def environment(home: Path, base_url: str, config_path: Path, password: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OPENCODE_SERVER_USERNAME=USERNAME,
        OPENCODE_SERVER_PASSWORD=password,
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local/state"),
        OPENCODE_CONFIG=str(config_path),
        SSE_BASE_URL=base_url,
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="1",
        OPENCODE_DISABLE_SHARE="1",
        OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
        OPENCODE_DISABLE_CLAUDE_CODE="1",
    )
    return env


def wait_for_port(port: int, limit: float, server: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and server.poll() is None:
        with socket.socket() as probe:
            probe.settimeout(1)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.2)
    return False


def end(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL, to the process's whole group."""
    if process is None or process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def main() -> int:
    archive = Path(os.environ.get("SSE_ARCHIVE", "/tmp/sse-archive"))
    model = os.environ.get("SSE_MODEL_NAME", "")
    if not model or not os.environ.get("SSE_BASE_URL"):
        say("no model: run with --model")
        return 2
    task = project()
    refused = threading.Event()

    def on_refusal(status: int, message: str) -> None:
        say(f"the gateway refused a call ({status}): {' '.join(message.split())[:300]}")
        refused.set()

    relay, recorder = dialog_recorder.start(
        os.environ["SSE_BASE_URL"], str(archive / "dialog.jsonl"), on_refusal
    )
    home = Path(os.environ.get("TMPDIR", "/tmp")) / f"opencode-{os.getpid()}"
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    config_path = home / "opencode.json"
    config_path.write_text(json.dumps(config(model), indent=2))
    password = secrets.token_urlsafe(24)
    server_file = archive / "opencode-server.json"
    server_file.write_text(
        json.dumps({"port": PORT, "username": USERNAME, "password": password}) + "\n"
    )
    env = environment(home, f"http://127.0.0.1:{relay.server_address[1]}", config_path, password)
    opencode = binary()
    server = subprocess.Popen(
        [opencode, "serve", "--hostname", HOST, "--port", str(PORT)],
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    run: subprocess.Popen[bytes] | None = None
    code = 0
    try:
        if not wait_for_port(PORT, SERVER_START, server):
            say(f"opencode serve did not listen on port {PORT}")
            return 1
        say(f"opencode serve listens on {HOST}:{PORT}; starting the session")
        run = subprocess.Popen(
            [
                *(opencode, "run", "--attach", f"http://127.0.0.1:{PORT}"),
                *("--dir", str(Path.cwd()), "--model", f"sse/{model}", prompt(task)),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        while run.poll() is None:
            if refused.wait(0.5):
                try:
                    run.wait(REFUSAL_GRACE)
                except subprocess.TimeoutExpired:
                    say("stopping: the run's budget is spent")
                    code = 1
                break
        if code == 0 and run.poll() is not None:
            code = run.returncode
    finally:
        end(run)
        end(server)
        relay.shutdown()
    say(f"done: {recorder.calls} model calls recorded in {archive / 'dialog.jsonl'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
