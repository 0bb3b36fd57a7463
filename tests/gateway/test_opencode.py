"""OpenCode (agents/opencode, npm `opencode-ai`) solving the demo tasks through the gateway.

The session's scripted model replays a script of `scripts/model-scripts/opencode/`
per test: a fixing one per task (it looks at the tree with `bash`, `read`s the
file, `edit`s the fix whose text is in the script, runs the MCP tool
`ssebench_test_patch` and finishes), one that never fixes anything, and one that
loops until the run's budget (or its time) is spent. OpenCode's title call is
answered by the scripts' `when` reply wherever it comes. The real OpenCode binary,
installed from the npm packages the host prepared, runs each one in a real
container as `model`, with its session in `opencode serve` on port 4096.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ssebench.backends.docker import DockerGateway
from ssebench.runner.scripted import load_script
from ssebench.spec import DialogEntry

from .conftest import (
    HOME,
    MODEL,
    PROBE_PYTHON,
    Upstream,
    assert_bypassed_nothing,
    assert_spend_of_a_killed_run,
    bypass_probe,
    priced,
    run_scripted_agent,
    ssebench,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3000)]

AGENT = "opencode"
SCRIPTS = HOME / "scripts" / "model-scripts" / AGENT
TASKS = ("pyarchive-path-traversal", "tlvkit-heap-overflow")
TITLE = "Fix the vulnerability"
"""The scripts' answer to OpenCode's title call."""


@dataclass(frozen=True)
class Run:
    summary: dict[str, Any]
    run_dir: Path
    calls: list[dict[str, Any]]
    """What the scripted model answered during the run (usage per call)."""
    dialog: list[DialogEntry]

    @property
    def steps(self) -> list[DialogEntry]:
        """The answered calls of the agent's loop (the title call left out)."""
        return [e for e in self.dialog if e.status == 200 and e.reply != TITLE]

    def tools(self) -> list[str]:
        return [call["function"]["name"] for entry in self.steps for call in entry.tool_calls]


def run_agent(upstream: Upstream, tmp_path: Path, task: str, script: str, *options: str) -> Run:
    done = run_scripted_agent(upstream, tmp_path, AGENT, task, SCRIPTS / script, *options)
    dialog = [msgspec.json.decode(line, type=DialogEntry) for line in done.dialog_lines]
    return Run(done.summary, done.run_dir, done.calls, dialog)


def scripted_tools(script: str) -> list[str]:
    replies = json.loads((SCRIPTS / script).read_text())["replies"]
    return [
        call["name"]
        for reply in replies
        if "when" not in reply
        for call in reply.get("tool_calls", [])
    ]


def assert_accounted(run: Run, gateway: DockerGateway) -> None:
    """Every answered call is a line of dialog.jsonl with its usage; spend = the scripted
    usage x price; the run's key was revoked when the run ended."""
    answered = [entry for entry in run.dialog if entry.status == 200]
    assert len(answered) == len(run.calls)
    usage = Counter(
        (c["usage"]["prompt_tokens"], c["usage"]["completion_tokens"]) for c in run.calls
    )
    recorded = Counter(
        (e.usage.prompt_tokens, e.usage.completion_tokens) for e in answered if e.usage
    )
    assert recorded == usage
    assert all(entry.model == MODEL and entry.timestamp for entry in run.dialog)
    assert sum(1 for entry in answered if entry.reply == TITLE) == 1  # its title call
    assert run.summary["spend"] == pytest.approx(priced(run.calls))
    assert run.summary["usage"]["calls"] == len(run.calls)
    used = gateway.store.usage(run.summary["run_id"])
    assert used is not None and used.revoked
    assert used.spend == pytest.approx(priced(run.calls))


def assert_session_served_on_4096(run: Run) -> None:
    log = (run.run_dir / "agent.log").read_text()
    assert "opencode serve listens on 0.0.0.0:4096" in log
    assert "opencode server listening on http://0.0.0.0:4096" in log


@pytest.mark.parametrize("task", TASKS)
def test_opencode_with_a_fixing_model_passes_every_check(
    task: str, gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    run = run_agent(scripted, tmp_path, task, f"{task}.fix.json", "--timeout", "900")

    result = run.summary["patch_result"]
    assert result["status"] == "passed", result
    assert result["build_success"] is True
    assert result["pov_total"] >= 1 and result["pov_passed"] == result["pov_total"]
    assert result["func_test_success"] is True and result["intent_test_success"] is True
    assert run.summary["outcome"] == "passed"
    assert run.tools() == scripted_tools(f"{task}.fix.json")
    assert_accounted(run, gateway)
    # The MCP tool ran the checks difficulty 2 allows, and its answer reached the model.
    after = run.steps[run.tools().index("ssebench_test_patch") + 1].messages
    results = [m["content"] for m in after if m.get("role") == "tool"]
    assert results and "test_patch: PASSED" in str(results[0]), after
    assert "build: PASSED" in str(results[0]) and "function tests: PASSED" in str(results[0])
    assert_session_served_on_4096(run)


@pytest.mark.parametrize("task", TASKS)
def test_opencode_with_a_model_that_never_fixes_fails_like_dummy(
    task: str, gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    run = run_agent(scripted, tmp_path, task, "never-fixes.json", "--timeout", "900")

    result = run.summary["patch_result"]
    assert result["status"] == "failed", result
    assert result["build_success"] is True and result["func_test_success"] is True
    assert result["pov_total"] >= 1 and result["pov_passed"] == 0
    assert result["intent_test_success"] is False
    assert run.summary["outcome"] == "failed"
    assert run.summary["runtime_result"]["agent_exit_code"] == 0
    assert (run.run_dir / "final.patch").read_text() == ""
    assert run.tools() == scripted_tools("never-fixes.json")
    assert_accounted(run, gateway)


def test_opencode_stops_on_the_gateways_refusal_and_is_graded_as_budget_exceeded(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    # loops.json's calls are counted as sent: OpenCode's prompt (its tools included) costs
    # about 1 at the session's prices. The title call and the loop's first calls are
    # admitted while what is left pays for a call's prompt and a token; then it is refused.
    run = run_agent(
        scripted,
        tmp_path,
        TASKS[0],
        "loops.json",
        "--budget",
        "4",
        "--timeout",
        "900",
    )

    assert run.summary["outcome"] == "budget_exceeded"
    assert run.summary["patch_result"]["status"] == "failed"  # graded anyway
    assert run.summary["patch_result"]["build_success"] is True
    assert len(run.calls) >= 2
    assert run.summary["spend"] <= 4
    assert run.summary["usage"]["refused_for_budget"] >= 1
    refused = [entry for entry in run.dialog if entry.status == 401]
    assert refused and all("budget" in (entry.error or "") for entry in refused)
    assert_accounted(run, gateway)
    # It stopped at the refusal, long before its time limit.
    assert "the gateway refused a call (401)" in (run.run_dir / "agent.log").read_text()
    assert run.summary["runtime_result"]["agent_timeout"] is False
    assert run.summary["runtime_result"]["agent_duration"] < 600


def test_opencode_stops_at_the_runs_timeout_and_its_dialog_keeps_every_call(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    run = run_agent(
        scripted,
        tmp_path,
        TASKS[0],
        "loops.json",
        "--timeout",
        "150",  # OpenCode starts slowly on a busy machine: 60 s saw two calls only
    )

    assert run.summary["outcome"] == "agent_timeout"
    runtime = run.summary["runtime_result"]
    assert runtime["agent_timeout"] is True and runtime["agent_exit_code"] == 124
    assert run.summary["patch_result"]["status"] == "failed"  # graded anyway
    assert len(run.steps) >= 3  # it was working when the time limit killed it
    # Killed mid-loop: each answered call was appended as it returned; at most the one
    # call in flight at the kill is missing.
    answered = [entry for entry in run.dialog if entry.status == 200]
    assert len(run.calls) - 1 <= len(answered) <= len(run.calls)
    assert_spend_of_a_killed_run(run, gateway)


def probe_script(folder: Path, source: str) -> str:
    """A script in which OpenCode's model writes the integrity suite's `bypass` probe into
    the tree with OpenCode's `write` tool, runs it with its `bash` tool, and stops."""
    probe = f"{source}/sse-probe"
    files = bypass_probe()
    usage = {"prompt_tokens": 100, "completion_tokens": 50}
    replies: list[dict[str, Any]] = [{"when": "You are a title generator", "content": TITLE}]
    for name, text in files.items():
        write = {"name": "write", "arguments": {"filePath": f"{probe}/{name}", "content": text}}
        replies.append({"content": "", "tool_calls": [write], **usage})
    command = f"{PROBE_PYTHON} {probe}/agent.py"
    run = {"name": "bash", "arguments": {"command": command, "description": "Probe"}}
    replies.append({"content": "", "tool_calls": [run], **usage})
    replies.append({"content": "Probed.", **usage})
    path = folder / "probe.json"
    path.write_text(json.dumps({"replies": replies, "cycle": False}))
    return str(path)


@pytest.mark.parametrize(
    ("task", "source"), [(TASKS[0], "/src/pyarchive"), (TASKS[1], "/src/tlvkit")]
)
def test_opencode_and_its_tools_run_as_every_agent_does(
    task: str, source: str, gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    """OpenCode's own tools (write, bash) carry the integrity suite's bypass probe: what
    they run is `model` with no other group, reads nothing protected, gets 403 from the
    admin routes and reaches no address beyond the gateway (docs/integrity.md)."""
    script = Path(probe_script(tmp_path, source))
    run = run_agent(scripted, tmp_path, task, str(script), "--timeout", "900")

    assert_bypassed_nothing(json.loads((run.run_dir / "archive" / "report.json").read_text()))
    assert run.summary["outcome"] == "failed"  # graded as usual; the probe fixes nothing
    assert run.tools() == ["write", "write", "bash"]


def test_the_session_is_served_on_port_4096_where_this_host_reaches_it(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    """`opencode run` attaches to the run's own `opencode serve` on 4096: while the agent
    works, `ssebench runs endpoint RUN 4096` reaches the server, which refuses a request
    without the run's password and with it lists the session and its messages."""
    usage = {"prompt_tokens": 100, "completion_tokens": 50}
    wait = {"name": "bash", "arguments": {"command": "sleep 40", "description": "Wait"}}
    replies = [
        {"when": "You are a title generator", "content": TITLE},
        {"content": "Waiting a while.", "tool_calls": [wait], **usage},
        {"content": "Done waiting.", **usage},
    ]
    script = tmp_path / "waits.json"
    script.write_text(json.dumps({"replies": replies, "cycle": False}))
    scripted.model.use(load_script(script))
    run_id = "opencode-" + secrets.token_hex(3)
    env = {**os.environ, "SSEBENCH_HOME": str(HOME)}
    argv = [ssebench(), "run", "--task", TASKS[0], "--agent", AGENT, "--run-id", run_id]
    with subprocess.Popen(
        [*argv, "--model", MODEL, "--timeout", "900", "--json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as running:
        archive = tmp_path / "results" / TASKS[0] / MODEL / AGENT / run_id / "archive"
        sessions = _sessions_while_running(run_id, archive, env, running)
        stdout, _ = running.communicate(timeout=1800)
    assert running.returncode == 0
    assert json.loads(stdout)["outcome"] == "failed"
    unauthorized, listed, messages = sessions
    assert unauthorized == 401
    assert len(listed) == 1 and listed[0]["title"] == TITLE, listed
    texts = json.dumps(messages)
    assert "sleep 40" in texts  # the tool call the model made, as the server shows it


def _sessions_while_running(
    run_id: str, archive: Path, env: dict[str, str], running: subprocess.Popen[bytes]
) -> tuple[int, list[Any], list[Any]]:
    """Once the model's `sleep 40` runs: the status of an unauthenticated GET /session, the
    sessions, and the first session's messages, through `runs endpoint`."""
    deadline = time.monotonic() + 1200
    while time.monotonic() < deadline and running.poll() is None:
        server = archive / "opencode-server.json"
        dialog = archive / "dialog.jsonl"
        if server.is_file() and dialog.is_file() and "sleep 40" in dialog.read_text():
            break
        time.sleep(2)
    assert running.poll() is None, "the run ended before the model's sleep"
    found = subprocess.run(
        [ssebench(), "runs", "endpoint", run_id, "4096", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    url = json.loads(found.stdout)["url"].rstrip("/")
    secret = json.loads((archive / "opencode-server.json").read_text())
    token = base64.b64encode(f"{secret['username']}:{secret['password']}".encode()).decode()

    def get(path: str, auth: bool = True) -> Any:
        request = urllib.request.Request(url + path)
        if auth:
            request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    try:
        get("/session", auth=False)
        unauthorized = 200
    except urllib.error.HTTPError as error:
        unauthorized = error.code
    listed = get("/session")
    messages = get(f"/session/{listed[0]['id']}/message") if listed else []
    return unauthorized, listed, messages
