"""Grading on the real wire (fake privileges): `prepare_grading` writes its files and
applies the diff once, kills what grading started as `model`, answers nothing the
agent shaped with a 500; a check stops at the time limit its request gives."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ssebench.spec import PatchResult, Result, RuntimeResult, encode_json

from .conftest import Running
from .fakes import TAG, FakeTask, tagged, write_script
from .test_diff import git

pytestmark = pytest.mark.process


def git_commit(tree: Path, message: str) -> None:
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", message)


def bash(running: Running, command: str) -> dict[str, object]:
    response = running.agent.post("/tool/bash", json={"command": command})
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_prepare_grading_writes_the_patch_and_history_and_applies_the_diff_once(
    running: Running,
) -> None:
    bash(running, "printf 'fixed\\n' > lib.txt && git commit -qam 'agent fix' && echo ok")
    assert running.admin.post("/admin/agent_exited").status_code == 200
    first = running.admin.post("/prepare_grading")
    assert first.status_code == 200, first.text
    assert first.json()["success"] is True
    results = running.config.results_dir
    patch = (results / "final.patch").read_text()
    assert "-bug\n+fixed\n" in patch
    assert "agent fix" in (results / "commits.log").read_text()
    assert (running.config.repo_dir / "lib.txt").read_text() == "fixed\n"
    assert running.agent.get("/final_diff").json() == {"diff": patch}
    # A second call answers the same and applies nothing again.
    assert running.admin.post("/prepare_grading").json() == first.json()
    assert (running.config.repo_dir / "lib.txt").read_text() == "fixed\n"
    # Checks start from the graded copy, with or without `grading`.
    for grading in (True, False):
        response = running.admin.post(
            "/tool/bencher", params={"action": "build"}, json={"grading": grading}
        )
        assert response.json()["stdout"] == "built fixed\n", response.text
        assert response.json()["code"] == 0
    poc = running.admin.post(
        "/tool/bencher", params={"action": "run_poc"}, json={"grading": True, "poc": 0}
    )
    assert poc.json()["code"] == 0, poc.text


def test_the_agent_phase_checks_apply_the_agents_diff_to_a_pristine_copy(running: Running) -> None:
    bash(running, "printf 'fixed\\n' > lib.txt && rm -rf .git")
    build = running.agent.post("/tool/bencher", params={"action": "build"}, json={})
    assert build.json()["stdout"] == "built fixed\n", build.text
    intent = running.agent.post("/tool/bencher", params={"action": "intent_test"}, json={})
    assert intent.json()["code"] == 0, intent.text
    assert (running.config.repo_dir / "lib.txt").read_text() == "bug\n"
    assert not (running.config.repo_dir / "tests" / "intent.sh").exists()


def test_result_answers_the_grade_once_written_and_refuses_a_broken_one(running: Running) -> None:
    path = running.config.results_dir / "result.json"
    assert running.agent.get("/result").status_code == 404
    path.parent.mkdir(parents=True, exist_ok=True)
    grade = Result(
        patch_result=PatchResult(status="passed", build_success=True, pov_passed=2, pov_total=2),
        runtime_result=RuntimeResult(agent_duration=1.5, agent_exit_code=0),
    )
    path.write_bytes(encode_json(grade))
    for client in (*running.agent_facing, running.admin):
        body = client.get("/result").json()
        assert body["patch_result"]["status"] == "passed"
        assert body["patch_result"]["pov_passed"] == 2
        assert body["runtime_result"]["agent_exit_code"] == 0
    path.write_text("{}")
    broken = running.agent.get("/result")
    assert broken.status_code == 500
    assert broken.json()["code"] == "internal_error"
    assert "not a valid grade" in broken.json()["error"]


def test_prepare_grading_ends_the_agent_phase_if_nobody_did(running: Running) -> None:
    bash(running, "printf 'fixed\\n' > lib.txt")
    assert running.admin.post("/prepare_grading").status_code == 200
    refused = running.agent.post("/tool/bash", json={"command": "printf 'later\\n' > lib.txt"})
    assert refused.status_code == 403
    assert refused.json()["code"] == "agent_phase_over"
    assert "+fixed" in (running.config.results_dir / "final.patch").read_text()


HANGING_BUILD = """\
#!/bin/bash
echo started
setsid sleep 300 &
sleep 300
"""


def test_a_check_is_stopped_at_the_limit_its_request_gives_and_never_past_sse_check_timeout(
    start_daemon: Callable[..., Running],
) -> None:
    running = start_daemon(check_timeout=3.0)
    write_script(running.config.task_dir / "scripts" / "build.sh", HANGING_BUILD)
    for client, timeout, stopped in (
        (running.admin, 1.0, "stopped after 1 s (the time limit of this request)"),
        (running.agent, 0.5, "stopped after 0.5 s (the time limit of this request)"),
        # A request can only shorten its check: asking for more gets SSE_CHECK_TIMEOUT.
        (running.agent, 100.0, "stopped after 3 s (the limit SSE_CHECK_TIMEOUT)"),
        (running.admin, 100.0, "stopped after 3 s (the limit SSE_CHECK_TIMEOUT)"),
    ):
        began = time.monotonic()
        response = client.post(
            "/tool/bencher", params={"action": "build"}, json={"timeout": timeout}
        )
        took = time.monotonic() - began
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["code"], body["timed_out"], body["stdout"]) == (-1, True, "started\n")
        assert stopped in body["stderr"]
        assert min(timeout, 3.0) <= took < min(timeout, 3.0) + 5, took
        assert tagged(running.privileges.extra_env[TAG]) == [], "the check's processes live on"


def test_a_check_limit_that_is_not_a_positive_number_is_a_400(running: Running) -> None:
    for client in (running.agent, running.admin):
        for timeout in (0, -1, "soon", [5]):
            response = client.post(
                "/tool/bencher", params={"action": "build"}, json={"timeout": timeout}
            )
            assert response.status_code == 400, (timeout, response.text)
            assert response.json()["code"] == "bad_request"
    # Nothing was run for them: the next check is the first.
    build = running.admin.post("/tool/bencher", params={"action": "build"}, json={"timeout": 20})
    assert build.json()["code"] == 0, build.text
    assert sorted(p.name for p in running.config.results_dir.glob("*build*")) == [
        "check-0001-build.log"
    ]


def test_a_shipped_file_the_agent_un_ignored_and_changed_is_graded(
    task: FakeTask, start_daemon: Callable[..., Running]
) -> None:
    # The image ships a generated file its .gitignore ignores (so the agent's
    # initial commit lacks it, and on 1bf8a76 the diff added it: `git apply` refused).
    for tree in (task.config.repo_dir, task.source):
        (tree / ".gitignore").write_text("*.gen\n")
        (tree / "config.gen").write_text("generated\n")
    git_commit(task.source, "ignore generated files")
    running = start_daemon()
    bash(running, "printf '' > .gitignore && echo 'changed' > config.gen && echo x > new.txt")
    assert running.admin.post("/admin/agent_exited").status_code == 200
    answer = running.admin.post("/prepare_grading")
    assert answer.status_code == 200, answer.text
    assert (running.config.repo_dir / "config.gen").read_text() == "changed\n"
    assert (running.config.repo_dir / ".gitignore").read_text() == ""
    assert (running.config.repo_dir / "new.txt").read_text() == "x\n"


@pytest.mark.parametrize("applies", [True, False])
def test_prepare_grading_kills_what_a_grading_step_started_as_model(
    running: Running, monkeypatch: pytest.MonkeyPatch, applies: bool
) -> None:
    """Stands in for agent code a grading step could start (a lazy fetch, a hook): it
    must be dead when prepare_grading answers, whether grading could go on or not."""
    bash(running, "printf 'fixed\\n' > lib.txt")
    if not applies:
        (running.config.repo_dir / "lib.txt").write_text("moved on\n")
    tag = running.privileges.extra_env[TAG]
    started: list[subprocess.Popen[bytes]] = []
    taken = running.daemon.differ.commits_log

    async def commits_log() -> str:
        started.append(
            subprocess.Popen(
                ["sleep", "1000"], env={**os.environ, TAG: tag}, start_new_session=True
            )
        )
        return await taken()

    monkeypatch.setattr(running.daemon.differ, "commits_log", commits_log)
    assert running.admin.post("/admin/agent_exited").status_code == 200
    answer = running.admin.post("/prepare_grading")
    assert answer.status_code == (200 if applies else 409), answer.text
    assert len(started) == 1
    assert started[0].wait(5) == -signal.SIGKILL
    assert tagged(tag) == []


def test_a_tree_the_agent_closed_to_itself_is_a_conflict_never_a_500(running: Running) -> None:
    bash(running, 'chmod 0 "$PWD"')
    try:
        for client in (running.agent, running.admin):
            answer = client.get("/diff")
            assert answer.status_code == 409, answer.text
            assert answer.json()["code"] == "tree_unreadable", answer.text
            assert "cannot be read" in answer.json()["error"]
        # The end of the agent phase gives the top back to its owner as 0750 (closed to
        # others), so grading reads the tree.
        assert running.admin.post("/admin/agent_exited").status_code == 200
        assert running.daemon.source.stat().st_mode & 0o777 == 0o750
        answer = running.admin.post("/prepare_grading")
        assert answer.status_code == 200, answer.text
    finally:
        running.daemon.source.chmod(0o755)


def test_changes_to_protected_paths_are_left_out_of_every_check_and_of_the_grade(
    task: FakeTask, start_daemon: Callable[..., Running]
) -> None:
    config = task.config.task_config
    config.write_text(config.read_text() + "protected: ['tests/**']\n")
    running = start_daemon()
    # The "fix" breaks the library and rewrites the test that would say so.
    bash(running, "rm lib.txt && printf 'exit 0\\n' > tests/basic.sh && rm -rf .git")
    tests = running.agent.post("/tool/bencher", params={"action": "function_test"}, json={})
    assert tests.json()["code"] != 0, tests.text
    assert tests.json()["stderr"].endswith(
        "ssebench: your changes to protected paths were left out, as grading leaves them "
        "out: tests/basic.sh\n"
    )
    answer = running.admin.post("/prepare_grading")
    assert answer.json()["dropped"] == ["tests/basic.sh"], answer.text
    patch = (running.config.results_dir / "final.patch").read_text()
    assert "lib.txt" in patch and "tests/basic.sh" not in patch
    assert (running.config.repo_dir / "tests" / "basic.sh").read_text() == "test -f lib.txt\n"
