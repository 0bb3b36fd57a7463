"""`prepare_grading` on the real wire (fake privileges): files written, the diff applied once."""

from __future__ import annotations

from .conftest import Running


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
