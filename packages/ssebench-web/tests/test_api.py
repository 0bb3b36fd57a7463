"""The JSON API the pages use, against the fake backend."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from starlette.testclient import TestClient

from ssebench.spec import labels

from .conftest import ReachingBackend, fake_run, record, summary


def test_the_runs_list_merges_live_runs_and_recorded_ones_newest_first(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    record(results, "old", summary("old", "2025-01-01T00:00:00Z", outcome="failed"))
    record(results, "kept", summary("kept", "2025-01-02T00:00:00Z"))
    backend.add_run(fake_run("kept", results, created_at="2025-01-02T00:00:01Z"))
    backend.add_run(fake_run("live", results, created_at="2025-01-03T00:00:00Z"))
    answer = client.get("/api/runs").json()
    assert (answer["backend"], answer["supports_exec"], answer["total"]) == ("fake", True, 3)
    rows = {row["run_id"]: row for row in answer["runs"]}
    assert [row["run_id"] for row in answer["runs"]] == ["live", "kept", "old"]
    assert (rows["live"]["state"], rows["live"]["outcome"]) == ("running", None)
    # A kept run: its container's state and its grade on one row.
    assert (rows["kept"]["state"], rows["kept"]["outcome"]) == ("running", "passed")
    assert (rows["old"]["state"], rows["old"]["outcome"]) == ("gone", "failed")
    assert rows["old"]["checks"]["function_test"] == "failed"


def test_the_runs_list_filters_by_task_agent_model_and_outcome(
    client: TestClient, results: Path
) -> None:
    record(results, "a", summary("a", "2025-01-01T00:00:00Z", outcome="failed"))
    record(results, "b", summary("b", "2025-01-02T00:00:00Z", task="other"), task="other")
    record(results, "c", summary("c", "2025-01-03T00:00:00Z", agent="x"), agent="x")
    assert [r["run_id"] for r in client.get("/api/runs?outcome=failed").json()["runs"]] == ["a"]
    assert [r["run_id"] for r in client.get("/api/runs?task=other").json()["runs"]] == ["b"]
    assert [r["run_id"] for r in client.get("/api/runs?agent=x").json()["runs"]] == ["c"]
    none = client.get("/api/runs?model=gpt&task=other").json()
    assert (none["runs"], none["total"]) == ([], 3)


def test_a_recorded_file_that_is_no_summary_is_a_warning_not_an_error(
    client: TestClient, results: Path
) -> None:
    folder = results / "t" / "m" / "a" / "broken"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text("{not json")
    answer = client.get("/api/runs").json()
    assert answer["runs"] == []
    assert len(answer["warnings"]) == 1 and "broken" in answer["warnings"][0]


def test_one_run_has_its_settings_grade_checks_with_logs_and_final_diff(
    client: TestClient, results: Path
) -> None:
    run_dir = record(results, "r1", summary("r1", "2025-01-01T00:00:00Z", touched=True))
    (run_dir / "check-0002-run_poc.log").write_text("poc said no\n")
    (run_dir / "check-0001-build.log").write_text("built\n")
    (run_dir / "final.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n")
    answer = client.get("/api/runs/r1").json()
    assert answer["live"] is None
    assert answer["summary"]["outcome"] == "passed"
    assert answer["summary"]["touched"] is True
    assert answer["checks"] == [
        {"name": "build", "log": "built\n"},
        {"name": "run_poc", "log": "poc said no\n"},
    ]
    assert answer["final_diff"].endswith("+new\n")
    assert answer["run_dir"] == str(run_dir)


def test_a_run_nobody_knows_is_404(client: TestClient) -> None:
    answer = client.get("/api/runs/nope")
    assert answer.status_code == 404
    assert answer.json() == {"error": "no run has the ID 'nope'"}


def test_a_run_directory_outside_the_results_folder_is_never_read(
    client: TestClient, backend: ReachingBackend, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    record(elsewhere, "r1", summary("r1", "2025-01-01T00:00:00Z"))
    backend.add_run(fake_run("r1", elsewhere))
    answer = client.get("/api/runs/r1").json()
    assert (answer["run_dir"], answer["summary"]) == (None, None)
    assert answer["live"]["run_id"] == "r1"


def test_links_planted_in_a_run_directory_are_not_followed(
    client: TestClient, results: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("host secret")
    run_dir = record(results, "r1", summary("r1", "2025-01-01T00:00:00Z"))
    (run_dir / "final.patch").symlink_to(secret)
    (run_dir / "archive" / "dialog.jsonl").symlink_to(secret)
    (run_dir / "check-0001-build.log").symlink_to(secret)
    answer = client.get("/api/runs/r1")
    assert "host secret" not in answer.text
    assert client.get("/api/runs/r1/dialog").json() == []


def test_logs_come_from_the_backend_from_a_line_on(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    backend.add_run(fake_run("r1", results), output=["one", "two", "three"])
    assert client.get("/api/runs/r1/logs").json() == {
        "lines": ["one", "two", "three"],
        "next": 3,
        "source": "backend",
    }
    assert client.get("/api/runs/r1/logs?since=2").json()["lines"] == ["three"]
    assert client.get("/api/runs/r1/logs?since=x").status_code == 400


def test_logs_of_a_run_whose_container_is_gone_come_from_its_agent_log(
    client: TestClient, results: Path
) -> None:
    run_dir = record(results, "r1", summary("r1", "2025-01-01T00:00:00Z"))
    (run_dir / "agent.log").write_text("thinking\ndone\n")
    answer = client.get("/api/runs/r1/logs").json()
    assert (answer["lines"], answer["source"]) == (["thinking", "done"], "agent.log")


def test_the_dialog_is_one_entry_per_line_and_a_bad_line_is_shown_as_text(
    client: TestClient, results: Path
) -> None:
    run_dir = record(results, "r1", summary("r1", "2025-01-01T00:00:00Z"))
    call = {"model": "m", "messages": [{"role": "user", "content": "<b>fix</b>"}], "reply": "ok"}
    (run_dir / "archive" / "dialog.jsonl").write_text(json.dumps(call) + "\n\n{oops\n")
    assert client.get("/api/runs/r1/dialog").json() == [call, {"unreadable": "{oops"}]


def test_the_daemon_of_a_finished_run_is_not_asked(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    backend.add_run(fake_run("r1", results, state="exited"))
    answer = client.get("/api/runs/r1/daemon/capabilities")
    assert answer.status_code == 409
    assert answer.json()["error"] == "run r1 is not running (exited)"


def test_only_capabilities_and_diff_are_read_from_the_daemon(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    backend.add_run(fake_run("r1", results))
    assert client.get("/api/runs/r1/daemon/reference").status_code == 404


def test_the_daemon_is_read_through_endpoint(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Daemon(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"path": self.path}).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Daemon)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend.daemon_url = f"http://127.0.0.1:{server.server_port}"
        backend.add_run(fake_run("r1", results))
        assert client.get("/api/runs/r1/daemon/diff").json() == {"path": "/diff"}
        assert client.get("/api/runs/r1/daemon/capabilities").json() == {"path": "/capabilities"}
    finally:
        server.shutdown()


def test_an_unreachable_daemon_is_502_with_why(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    backend.add_run(fake_run("r1", results))
    answer = client.get("/api/runs/r1/daemon/diff")
    assert answer.status_code == 502
    assert answer.json()["error"].startswith("cannot reach the run's daemon at http://127.0.0.1:9")


def test_pages_and_front_end_code_are_served(client: TestClient) -> None:
    assert "SSEBench runs" in client.get("/").text
    page = client.get("/runs/r1")
    assert (
        page.status_code == 200 and "default-src 'self'" in page.headers["content-security-policy"]
    )
    assert client.get("/vendor/xterm/lib/xterm.js").status_code == 200
    assert client.get("/static/run.js").status_code == 200


def test_a_run_directory_label_that_climbs_out_of_the_results_folder_is_not_followed(
    client: TestClient, backend: ReachingBackend, results: Path, tmp_path: Path
) -> None:
    record(tmp_path / "outside", "r1", summary("r1", "2025-01-01T00:00:00Z"))
    climbing = fake_run("r1", results)
    label = str(results / ".." / "outside" / "probe-task" / "none" / "probe" / "r1")
    backend.add_run(
        msgspec.structs.replace(climbing, labels={**climbing.labels, labels.RESULTS: label})
    )
    assert client.get("/api/runs/r1").json()["run_dir"] is None


def test_an_evaluation_is_listed_and_shown_as_ssebench_reports_it(
    client: TestClient, results: Path, tmp_path: Path
) -> None:
    from ssebench.spec import EvalRecord, EvalSettings, EvalSlot, encode_json

    record(results, "r1", summary("r1", "2025-01-01T00:00:00Z"))
    settings = EvalSettings(
        dataset="/d",
        tasks=["probe-task"],
        agents=["probe"],
        models=["none"],
        mode="sandbox",
        difficulty=0,
        repeat=1,
        timeout=60,
        check_timeout=60,
        egress="restricted",
        backend="fake",
    )
    slot = EvalSlot(task="probe-task", agent="probe", model="none", repeat=1, run_ids=["r1"])
    evaluation = EvalRecord(
        eval_id="e1", created_at="t", settings=settings, results=str(results), slots=[slot]
    )
    folder = tmp_path / "evals" / "e1"
    folder.mkdir(parents=True)
    (folder / "eval.json").write_bytes(encode_json(evaluation))
    assert client.get("/api/evals").json() == ["e1"]
    page = client.get("/evals/e1")
    assert page.status_code == 200
    assert "SSEBench evaluation e1" in page.text
    assert "100.0% (1/1" in page.text
    assert client.get("/evals/nope").status_code == 404
    assert client.get("/evals/..%2Fx").status_code == 404
