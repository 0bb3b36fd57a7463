"""Plugins in real containers: each hook at its moment as its user, timeouts, integrity, artifact.

Two runs of the demo task `pyarchive-path-traversal` carry every claim:

- the reference agent (it passes) with a probe plugin at each of the six hooks,
  a plugin that hangs at a model hook and one at a root hook (each with a
  3-second timeout), `artifact`, and `review` (skipped: the run has no model);
- the dummy agent (it fails) with a hostile `model` plugin that tries to read
  the hidden material, reach the admin socket and the results, and would apply
  the reference patch if it found it; and a root `after-grading` plugin that
  rewrites `result.json` to `passed`.

`review` against the scripted model is in tests/gateway/test_review_plugin.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import Ran, reference_lines, run, write_plugins

pytestmark = pytest.mark.docker

TASK = "pyarchive-path-traversal"
INTEGRITY_AGENTS = Path(__file__).resolve().parents[1] / "integrity" / "agents"
NOT_READ = ("denied", "missing")
BYPASS = """#!/bin/bash
# The integrity suite's hostile `bypass` agent, run by a plugin as model.
PY=$(command -v python3 || echo /opt/ssebench/bin/python3.11)
exec "$PY" "$(dirname "$0")/agent.py"
"""
HOOKS = ("before-agent", "on-agent", "after-agent", "before-grading", "on-grading", "after-grading")

PROBE = r"""#!/bin/bash
# Records who it runs as, at which hook, and what it can read, in its results folder.
out="$SSE_PLUGIN_OUT/probe.txt"
yes_no() { if "$@" >/dev/null 2>&1; then echo yes; else echo no; fi; }
{
    echo "hook=$SSE_PLUGIN_HOOK"
    echo "uid=$(id -u)"
    echo "id=$(id)"
    echo "key=${SSE_API_KEY:+set}"
    echo "read_task_config=$(yes_no cat /ssebench/config.yaml)"
    echo "read_reference=$(yes_no cat /ssebench/diffs/patch.diff)"
    echo "list_graded_repo=$(yes_no ls /ssebench-repo)"
    echo "read_results=$(yes_no ls /var/lib/ssebench/results)"
    echo "grade=$(head -c 200 /var/lib/ssebench/results/result.json 2>/dev/null | tr -d '\n')"
    echo "commits=$(git -C "$SSE_SOURCE" rev-list --count HEAD 2>/dev/null)"
} >"$out"
case "$SSE_PLUGIN_HOOK" in
*grading)
    evaluator=no
    for f in /proc/[0-9]*/cmdline; do
        tr '\0' ' ' <"$f" 2>/dev/null | grep -q 'daemon[.]evaluator' && evaluator=yes
    done
    echo "evaluator_running=$evaluator" >>"$out"
    ;;
esac
echo "probe at $SSE_PLUGIN_HOOK done"
case "$SSE_PLUGIN_HOOK" in on-*) sleep 600 ;; esac
"""

HANG = """#!/bin/bash
# Hangs, with a second process in its group: both must die at the timeout.
sleep 600 &
sleep 600
"""

THIEF = r"""#!/bin/bash
# A hostile plugin running as model after the agent: looks for the hidden material
# everywhere the agent could, tries the admin socket and the results, and applies the
# reference patch to the tree if it ever finds it (which would turn the grade to passed).
out="$SSE_PLUGIN_OUT"
found="$out/found.txt"; : >"$found"
try() {
    local what=$1
    shift
    if "$@" >>"$found" 2>/dev/null; then echo "$what=yes"; else echo "$what=no"; fi
}
{
    echo "uid=$(id -u)"
    try read_task_config cat /ssebench/config.yaml
    try read_reference cat /ssebench/diffs/patch.diff
    try read_reference_mount cat /reference/patch.diff
    try list_graded_repo ls -R /ssebench-repo
    try read_results cat /var/lib/ssebench/results/result.json
    try write_results sh -c 'echo forged >/var/lib/ssebench/results/result.json'
    try admin_socket python3 -c 'import socket
socket.socket(socket.AF_UNIX).connect("/run/ssebench/admin.sock")'
    try pid1_environ cat /proc/1/environ
    try reference_via_daemon python3 - <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(__import__("os").environ["SSE_DAEMON_SOCKET"])
s.sendall(b"GET /reference/patch HTTP/1.0\r\nHost: x\r\n\r\n")
answer = b"".join(iter(lambda: s.recv(65536), b""))
sys.stdout.write(answer.decode(errors="replace"))
sys.exit(0 if b" 200 " in answer.split(b"\r\n", 1)[0] + b" " else 1)
PY
    echo "key=${SSE_API_KEY:+set}"
    echo "results_env=${SSE_RESULTS:+set}"
} >"$out/report.txt"
for candidate in /ssebench/diffs/patch.diff /reference/patch.diff; do
    [ -r "$candidate" ] && git -C "$SSE_SOURCE" apply "$candidate" &&
        echo "applied $candidate" >>"$out/report.txt"
done
exit 0
"""

FORGER = r"""#!/bin/bash
# A root plugin after grading: rewrites the grade to passed.
python=${SSE_PYTHON:-python3}
"$python" -I - <<'PY'
import json, os
path = os.path.join(os.environ["SSE_RESULTS"], "result.json")
data = json.load(open(path))
data["patch_result"]["status"] = "passed"
open(path, "w").write(json.dumps(data))
PY
"""


def _probe_name(hook: str) -> str:
    return f"probe-{hook}"


def _probe(ran: Ran, hook: str) -> dict[str, str]:
    result = ran.plugin(_probe_name(hook))
    path = ran.run_dir / result["folder"] / "probe.txt"
    assert path.is_file(), f"{hook}: no probe.txt at {result['folder']}\n{ran.why()}"
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Ran:
    folder = tmp_path_factory.mktemp("probe-plugins")
    entries: list[dict[str, Any]] = [
        {"name": _probe_name(hook), "hook": hook, "timeout": 120} for hook in HOOKS
    ]
    entries += [
        {"name": "hang-model", "hook": "after-agent", "timeout": 3},
        {"name": "hang-root", "hook": "before-grading", "timeout": 3},
    ]
    scripts = {_probe_name(hook): PROBE for hook in HOOKS}
    scripts.update({"hang-model": HANG, "hang-root": HANG})
    plugins_file = write_plugins(folder / "plugins", entries, scripts)
    chosen = [entry["name"] for entry in entries] + ["artifact", "review"]
    return run(
        tmp_path_factory.mktemp("probe-runs"),
        plugins_file,
        task=TASK,
        agent="reference",
        plugins=chosen,
    )


def test_each_hook_runs_at_its_moment_as_its_user(probe_run: Ran) -> None:
    ran = probe_run
    assert ran.returncode == 0, ran.why()
    summary = ran.summary()
    assert summary["outcome"] == "passed"
    assert [p["name"] for p in summary["config"]["plugins"]][:6] == [
        _probe_name(hook) for hook in HOOKS
    ]
    probes = {hook: _probe(ran, hook) for hook in HOOKS}
    for hook in HOOKS[:3]:
        probe = probes[hook]
        assert probe["uid"] == "1000", probe
        assert "(model)" in probe["id"]
        assert ran.plugin(_probe_name(hook))["user"] == "model"
        assert ran.plugin(_probe_name(hook))["folder"].startswith("archive/plugins/")
        # As the agent: none of the hidden material, no results, no key. The on-agent
        # probe is killed when the agent ends (the reference agent takes a second): it
        # may not have written every line, but always the first ones.
        assert {"key", "read_task_config"} <= set(probe), (hook, probe)
        for what in ("read_task_config", "read_reference", "list_graded_repo", "read_results"):
            assert probe.get(what, "no") == "no", (hook, what)
        assert probe["key"] == ""
    for hook in HOOKS[3:]:
        assert probes[hook]["uid"] == "0", probes[hook]
        assert ran.plugin(_probe_name(hook))["user"] == "root"
        assert ran.plugin(_probe_name(hook))["folder"] == f"plugins/{_probe_name(hook)}"
        assert probes[hook]["read_task_config"] == "yes"
        assert probes[hook]["key"] == ""  # not llm: no model key, even as root
    # At its moment: the tree before and after the agent committed the fix; beside the
    # agent (started before the checker lets it start, ended with its phase once its
    # container's end was reported); the grade before and after grading.
    assert probes["before-agent"]["commits"] == "1"
    assert probes["after-agent"]["commits"] == "2"
    log = (ran.run_dir / "entrypoint.log").read_text()
    assert (
        log.index("plugin probe-on-agent (on-agent) started")
        < log.index("agent may start after")
        < log.index("plugin probe-on-agent: ok (the agent phase ended: killed)")
        < log.index("the agent container reported exit status 0")
        < log.index("plugin probe-after-agent (after-agent) started")
    )
    assert '"status"' not in probes["before-grading"]["grade"]
    assert probes["before-grading"]["evaluator_running"] == "no"
    assert probes["on-grading"]["evaluator_running"] == "yes"
    assert '"status": "passed"' in probes["after-grading"]["grade"].replace('":"', '": "')
    for hook in HOOKS:
        result = ran.plugin(_probe_name(hook))
        assert result["outcome"] == "ok", result
        if hook != "on-agent":
            assert (ran.run_dir / result["log"]).read_text() == f"probe at {hook} done\n"
    # Beside the agent and the evaluator: running until their phase ended, then killed.
    assert ran.plugin("probe-on-agent")["reason"] == "the agent phase ended: killed"
    assert ran.plugin("probe-on-grading")["reason"] == "grading ended: killed"


def test_a_plugin_that_hangs_is_killed_at_its_timeout_and_the_run_is_still_graded(
    probe_run: Ran,
) -> None:
    ran = probe_run
    assert ran.returncode == 0, ran.why()
    for name, user in (("hang-model", "model"), ("hang-root", "root")):
        result = ran.plugin(name)
        assert result["outcome"] == "timeout", result
        assert result["user"] == user
        assert result["reason"] == "killed at its timeout of 3 s"
        assert 3 <= result["duration"] < 20
    assert ran.summary()["patch_result"]["status"] == "passed"
    log = (ran.run_dir / "entrypoint.log").read_text()
    assert "plugin hang-root: timeout" in log


def test_an_llm_plugin_is_skipped_in_a_run_without_a_model(probe_run: Ran) -> None:
    result = probe_run.plugin("review")
    assert result["outcome"] == "skipped"
    assert "has none (--model)" in result["reason"]


def test_artifact_lists_every_result_file_with_its_size_digest_and_writer(probe_run: Ran) -> None:
    import hashlib

    ran = probe_run
    assert ran.plugin("artifact")["outcome"] == "ok", ran.plugin("artifact")
    manifest = json.loads((ran.run_dir / "plugins" / "artifact" / "manifest.json").read_text())
    files = {entry["path"]: entry for entry in manifest["files"]}
    writers = {
        "result.json": "evaluator",
        "final.patch": "daemon",
        "agent.log": "agent",
        "daemon.log": "daemon",
        "run.json": "runner",
        "plugins/probe-after-grading/probe.txt": "plugin:probe-after-grading",
        "archive/plugins/probe-before-agent/probe.txt": "plugin:probe-before-agent",
    }
    for path, writer in writers.items():
        assert files[path]["component"] == writer, files.get(path)
    for path, entry in files.items():
        if path in ("run.json", "result.json", "entrypoint.log") or path.startswith("plugins/"):
            continue  # written again after the manifest (or still being written)
        data = (ran.run_dir / path).read_bytes()
        assert entry["size"] == len(data), path
        assert entry["sha256"] == hashlib.sha256(data).hexdigest(), path
    assert not any(path.startswith("plugins/artifact") for path in files)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Ran:
    folder = tmp_path_factory.mktemp("hostile-plugins")
    entries = [
        {"name": "thief", "hook": "after-agent", "timeout": 120},
        {"name": "bypass", "hook": "after-agent", "timeout": 300},
        {"name": "forger", "hook": "after-grading", "timeout": 60},
    ]
    scripts = {"thief": THIEF, "bypass": BYPASS, "forger": FORGER}
    plugins_file = write_plugins(folder / "plugins", entries, scripts)
    for name in ("bypass/agent.py", "_shared/ssehostile.py"):
        shutil.copy(INTEGRITY_AGENTS / name, folder / "plugins" / "bypass")
    return run(
        tmp_path_factory.mktemp("hostile-runs"),
        plugins_file,
        task=TASK,
        agent="dummy",
        plugins=["thief", "bypass", "forger"],
    )


def test_a_model_plugin_carrying_the_integrity_suites_bypass_probe_gets_nothing(
    hostile_run: Ran,
) -> None:
    """The integrity suite's `bypass` agent, run as a plugin: it is `model` with no other
    group, reads nothing protected (directly or through the bash tool), gets 403 from the
    admin routes and reaches no address (docs/integrity.md)."""
    ran = hostile_run
    assert ran.plugin("bypass")["outcome"] == "ok", ran.plugin("bypass")
    report = json.loads((ran.run_dir / "archive" / "report.json").read_text())
    identity = report["identity"]
    assert (identity["uid"], identity["gid"]) == (1000, 1000), identity
    assert identity["groups"] == [] and identity["status_groups"] == [], identity
    assert {path: how for path, how in report["direct"].items() if how not in NOT_READ} == {}
    assert set(report["admin_routes"]) and all(
        answer["status"] == 403 for answer in report["admin_routes"].values()
    ), report["admin_routes"]
    reached = {
        address: how
        for address, how in report["network"].items()
        if "REACHED" in how or "refused" in how.lower()
    }
    assert reached == {} and report["network"], report["network"]
    assert ran.summary()["patch_result"]["status"] == "failed"  # the probe fixes nothing


def test_a_model_plugin_cannot_read_hidden_material_or_change_the_grade(hostile_run: Ran) -> None:
    ran = hostile_run
    assert ran.returncode == 0, ran.why()
    thief = ran.plugin("thief")
    assert thief["outcome"] == "ok", thief
    report = dict(
        line.split("=", 1)
        for line in (ran.run_dir / thief["folder"] / "report.txt").read_text().splitlines()
        if "=" in line
    )
    assert report["uid"] == "1000"
    for attempt in (
        "read_task_config",
        "read_reference",
        "read_reference_mount",
        "list_graded_repo",
        "read_results",
        "write_results",
        "admin_socket",
        "pid1_environ",
        "reference_via_daemon",
    ):
        assert report[attempt] == "no", (attempt, report)
    assert report["key"] == "" and report["results_env"] == ""
    assert "applied" not in (ran.run_dir / thief["folder"] / "report.txt").read_text()
    leaked = [
        line
        for path in ran.run_dir.rglob("*")
        if path.is_file() and "plugins" in path.parts
        for line in reference_lines(TASK)
        if line in path.read_text(errors="replace")
    ]
    assert leaked == []
    # The dummy agent changed nothing: the grade stays failed, whatever the plugins did.
    summary = ran.summary()
    assert summary["patch_result"]["status"] == "failed"
    assert summary["outcome"] == "failed"
    assert json.loads((ran.run_dir / "result.json").read_text())["patch_result"]["status"] == (
        "failed"
    )


def test_a_root_plugin_that_rewrites_the_grade_is_undone_and_recorded_failed(
    hostile_run: Ran,
) -> None:
    ran = hostile_run
    forger = ran.plugin("forger")
    assert forger["outcome"] == "failed", forger
    assert forger["reason"] == "it changed result.json, which was put back"
    assert ran.summary()["patch_result"]["status"] == "failed"
    assert (ran.run_dir / ".graded").read_text().strip() == "failed"


def test_plugins_never_change_the_exit_status(hostile_run: Ran, probe_run: Ran) -> None:
    # Failed and timed-out plugins in both runs; `ssebench run` exits 0 and the
    # container's exit status is the agent's.
    for ran in (hostile_run, probe_run):
        assert ran.returncode == 0, ran.why()
        assert ran.summary()["runtime_result"]["agent_exit_code"] == 0


def test_each_plugin_that_ran_has_its_log_and_folder_in_the_run_directory(
    probe_run: Ran,
) -> None:
    for result in probe_run.summary()["plugin_results"]:
        if result["outcome"] == "skipped":
            assert (result["log"], result["folder"]) == (None, None), result
            continue
        assert Path(result["log"]).parts[0] == "plugins"
        assert (probe_run.run_dir / result["log"]).is_file(), result
        assert (probe_run.run_dir / result["folder"]).is_dir(), result
