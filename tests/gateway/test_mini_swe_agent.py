"""mini-swe-agent (agents/mini-swe-agent, from PyPI) solving the demo tasks through the gateway.

The session's scripted model replays a script of `scripts/model-scripts/mini-swe-agent/`
per test: a fixing one per task (it looks, writes the fix whose text is in the script,
runs the tests on a copy of the tree by its own shell, and submits), one that never
fixes anything, and one that loops until the run's budget is spent. The real
mini-swe-agent runs each one in a real container, as `model`, through the gateway.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ssebench.backends.docker import DockerGateway
from ssebench.spec import DialogEntry

from .conftest import (
    AGENT_PID1_ENVIRON,
    HOME,
    MODEL,
    OWN_GROUPS,
    PROBE_PYTHON,
    Upstream,
    assert_bypassed_nothing,
    assert_spend_of_a_killed_run,
    bypass_probe,
    priced,
    run_scripted_agent,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3000)]

AGENT = "mini-swe-agent"
SCRIPTS = HOME / "scripts" / "model-scripts" / AGENT
TASKS = ("pyarchive-path-traversal", "tlvkit-heap-overflow")
FINISH = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
PROBE_PORT = 47819
"""The port probes.json tries on this host and an outside address."""
STATUS = ("Groups", "NoNewPrivs", "CapEff")


@dataclass(frozen=True)
class Run:
    summary: dict[str, Any]
    run_dir: Path
    calls: list[dict[str, Any]]
    """What the scripted model answered during the run (usage per call)."""
    dialog: list[dict[str, Any]]

    @property
    def replies(self) -> list[dict[str, Any]]:
        return [entry for entry in self.dialog if "reply" in entry]


def run_agent(upstream: Upstream, tmp_path: Path, task: str, script: str, *options: str) -> Run:
    done = run_scripted_agent(
        upstream, tmp_path, AGENT, task, SCRIPTS / script, "--timeout", "900", *options
    )
    for line in done.dialog_lines:  # each line is a DialogEntry (schemas/DialogEntry.json)
        msgspec.json.decode(line, type=DialogEntry)
    dialog = [json.loads(line) for line in done.dialog_lines]
    return Run(done.summary, done.run_dir, done.calls, dialog)


def commands(run: Run) -> list[str]:
    return [
        json.loads(call["function"]["arguments"])["command"]
        for entry in run.replies
        for call in entry["tool_calls"]
    ]


def assert_accounted(run: Run, gateway: DockerGateway, script: str) -> None:
    """Every call in dialog.jsonl, spend = the scripted usage x price, the key revoked."""
    replies = json.loads((SCRIPTS / script).read_text())["replies"]
    assert len(run.replies) == len(run.calls)
    for entry, call in zip(run.replies, run.calls, strict=True):
        assert entry["usage"] == {
            "prompt_tokens": call["usage"]["prompt_tokens"],
            "completion_tokens": call["usage"]["completion_tokens"],
        }
        assert entry["model"] == f"openai/{MODEL}" and entry["timestamp"]
    scripted = [reply["tool_calls"][0]["arguments"]["command"] for reply in replies]
    assert commands(run) == [scripted[i % len(scripted)] for i in range(len(run.replies))]
    assert run.dialog[0]["messages"][0]["role"] == "system"  # the first call's whole prompt
    # Each entry holds the messages its call added and says where in the request they
    # begin (DialogEntry.first_message): a reader can rebuild every request.
    sent = 0
    for entry in run.dialog:
        assert entry["first_message"] == sent, entry
        if "reply" in entry:
            sent += len(entry["messages"])
    assert run.summary["spend"] == pytest.approx(priced(run.calls))
    assert run.summary["usage"]["calls"] == len(run.calls)
    used = gateway.store.usage(run.summary["run_id"])
    assert used is not None and used.revoked
    assert used.spend == pytest.approx(priced(run.calls))


@pytest.mark.parametrize(
    ("task", "mode"),
    [(TASKS[0], "sandbox"), (TASKS[1], "sandbox"), (TASKS[0], "sidecar")],
)
def test_mini_swe_agent_with_a_fixing_model_passes_every_check(
    task: str, mode: str, gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    """In sidecar mode its commands go through the daemon's bash tool: the tests it runs
    need the project's toolchain, which only the task container has."""
    run = run_agent(
        scripted, tmp_path, task, f"{task}.fix.json", "--difficulty", "1", "--mode", mode
    )

    result = run.summary["patch_result"]
    assert result["status"] == "passed", result
    assert result["build_success"] is True
    assert result["pov_total"] >= 1 and result["pov_passed"] == result["pov_total"]
    assert result["func_test_success"] is True and result["intent_test_success"] is True
    assert run.summary["outcome"] == "passed"
    assert len(run.calls) == 4 and commands(run)[-1] == FINISH
    assert_accounted(run, gateway, f"{task}.fix.json")
    # It ran the tests by its own means: their output came back to the model.
    (tested,) = [m for m in run.dialog[3]["messages"] if m.get("role") == "tool"]
    assert '"returncode": 0' in tested["content"], tested
    assert run.summary["config"]["mode"] == mode
    trajectory = json.loads((run.run_dir / "archive" / "trajectory.json").read_text())
    assert trajectory["info"]["exit_status"] == "Submitted"


@pytest.mark.parametrize("task", TASKS)
def test_mini_swe_agent_with_a_model_that_never_fixes_fails_like_dummy(
    task: str, gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    run = run_agent(scripted, tmp_path, task, "never-fixes.json")

    result = run.summary["patch_result"]
    assert result["status"] == "failed", result
    assert result["build_success"] is True and result["func_test_success"] is True
    assert result["pov_total"] >= 1 and result["pov_passed"] == 0
    assert result["intent_test_success"] is False
    assert run.summary["outcome"] == "failed"
    assert run.summary["runtime_result"]["agent_exit_code"] == 0
    assert (run.run_dir / "final.patch").read_text() == ""
    assert_accounted(run, gateway, "never-fixes.json")


def test_mini_swe_agent_stops_on_the_gateways_refusal_and_is_graded_as_budget_exceeded(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    # loops.json's calls are counted as sent (about 0.2 each at the session's prices): a
    # call is admitted while what is left pays for its prompt and a token; the prompt grows.
    run = run_agent(scripted, tmp_path, TASKS[0], "loops.json", "--budget", "0.6")

    assert run.summary["outcome"] == "budget_exceeded"
    assert run.summary["patch_result"]["status"] == "failed"
    assert run.summary["patch_result"]["build_success"] is True  # graded anyway
    assert len(run.calls) >= 1
    assert run.summary["spend"] <= 0.6
    assert run.summary["usage"]["refused_for_budget"] == 1
    refused = [entry for entry in run.dialog if "error" in entry]
    assert len(refused) == 1 and "AuthenticationError" in refused[0]["error"]
    assert "budget" in refused[0]["error"]
    assert_accounted(run, gateway, "loops.json")
    # It stopped at the refusal: no retry, no further call.
    assert run.dialog[-1] is refused[0]


def test_mini_swe_agent_stops_at_the_runs_timeout_and_its_dialog_keeps_every_call(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    run = run_agent(scripted, tmp_path, TASKS[0], "loops.json", "--timeout", "60")

    assert run.summary["outcome"] == "agent_timeout"
    runtime = run.summary["runtime_result"]
    assert runtime["agent_timeout"] is True and runtime["agent_exit_code"] == 124
    assert run.summary["patch_result"]["status"] == "failed"  # graded anyway
    assert len(run.calls) >= 3  # it was working when the time limit killed it
    # Killed mid-loop: each answered call was appended as it returned; at most the one
    # call in flight at the kill is missing.
    assert len(run.calls) - 1 <= len(run.replies) <= len(run.calls)
    assert_spend_of_a_killed_run(run, gateway)


@pytest.mark.integrity
def test_mini_swe_agents_shell_has_the_user_groups_and_network_of_every_agent(
    gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    """Its commands run as `model` (uid/gid 1000, no other group, no capabilities, no new
    privileges), read none of the protected paths, and reach neither this host (a listener
    on every address, at the default route and host.docker.internal) nor an outside address;
    only the gateway, which answered its calls."""
    listener = socket.create_server(("0.0.0.0", PROBE_PORT), reuse_port=True)
    try:
        run = run_agent(scripted, tmp_path, TASKS[1], "probes.json")
    finally:
        listener.close()

    probe = (run.run_dir / "archive" / "probe.txt").read_text().splitlines()
    assert "ids 1000 1000 1000" in probe, probe
    status = dict(line.split(":", 1) for line in probe if line.split(":")[0] in STATUS)
    groups = [int(gid) for gid in status.pop("Groups", "").split()]
    assert groups in OWN_GROUPS, groups
    assert {name: value.strip() for name, value in status.items()} == {
        "NoNewPrivs": "1",
        "CapEff": "0000000000000000",
    }
    read = [line for line in probe if line.startswith("read ")]
    assert read in ([], [f"read {AGENT_PID1_ENVIRON}"]), read
    # Six protected paths tried: each closed, but the launcher's environment if read.
    assert len([line for line in probe if line.startswith("closed ")]) == 6 - len(read)
    reached = [line for line in probe if line.startswith("net ")]
    assert reached and not [line for line in reached if "REACHED" in line], reached
    assert len(run.calls) == 2 and run.summary["outcome"] == "failed"


PROBE_LOOKS = 45
"""Commands the model spends looking for the bypass probe's report (2 s each at most)."""


def bypass_script(folder: Path, source: str) -> Path:
    """A script in which the model writes the integrity suite's bypass probe into the tree
    with mini-swe-agent's shell, starts it in the background, looks for its report until
    it is written, and submits.

    In the background, because every command goes through the daemon's one `bash` shell,
    which the probe calls too: run in the foreground, it would wait for the shell its own
    command holds."""
    probe = f"{source}/sse-probe"
    usage = {"prompt_tokens": 100, "completion_tokens": 50}

    def reply(content: str, command: str) -> dict[str, Any]:
        return {
            "content": content,
            "tool_calls": [{"name": "bash", "arguments": {"command": command}}],
            **usage,
        }

    replies = [
        reply(f"Writing {name}.", f"mkdir -p {probe} && cat > {probe}/{name} <<'SSE_PROBE_END'\n"
              f"{text.rstrip(chr(10))}\nSSE_PROBE_END")
        for name, text in bypass_probe().items()
    ]  # fmt: skip
    started = f"(setsid {PROBE_PYTHON} {probe}/agent.py > {probe}/out.txt 2>&1 &)"
    replies.append(reply("Starting the probe.", started))
    report = "${SSE_ARCHIVE:-/tmp/sse-archive}/report.json"
    replies += [reply("Waiting.", f"test -s {report} && echo REPORTED || sleep 2")] * PROBE_LOOKS
    replies.append(reply("Done.", FINISH))
    path = folder / "bypass.json"
    path.write_text(json.dumps({"replies": replies, "cycle": False}))
    return path


@pytest.mark.integrity
@pytest.mark.parametrize(
    ("task", "source"), [(TASKS[0], "/src/pyarchive"), (TASKS[1], "/src/tlvkit")]
)
def test_mini_swe_agents_shell_carries_the_integrity_suites_bypass_probe_nowhere(
    task: str, source: str, gateway: DockerGateway, scripted: Upstream, tmp_path: Path
) -> None:
    """The integrity suite's bypass probe, run by mini-swe-agent's shell: what it runs is
    `model` with no other group, reads nothing protected, gets 403 from the admin routes
    and reaches no address beyond the gateway (docs/integrity.md)."""
    run = run_agent(scripted, tmp_path, task, str(bypass_script(tmp_path, source)))

    report = run.run_dir / "archive" / "report.json"
    assert report.is_file(), commands(run)[-3:]
    assert_bypassed_nothing(json.loads(report.read_text()))
    assert run.summary["outcome"] == "failed"  # graded as usual; the probe fixes nothing
    assert commands(run)[-1] == FINISH
