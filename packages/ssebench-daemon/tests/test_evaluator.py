"""The evaluator: grading order and rules on a fake daemon, then on the real wire."""

from __future__ import annotations

import json
import os
import tarfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ssebench.daemon._client import Reply
from ssebench.daemon._client._api import DaemonRefusedError
from ssebench.daemon._gate import Action
from ssebench.daemon._messages import (
    BencherRequest,
    BencherResponse,
    CapabilitiesResponse,
    PrepareGradingResponse,
    ProjectResponse,
    PublicDescription,
    PublicScripts,
)
from ssebench.daemon.evaluator import (
    Deadline,
    EvaluatorOptions,
    crash_result,
    evaluate,
    grade,
    main,
    write_result,
)
from ssebench.daemon.evaluator._files import MAX_ARCHIVED_FILE, write_source_archive
from ssebench.spec import PatchResult, Result, RuntimeResult, read_json

from .conftest import Running


class FakeGrading:
    """The admin routes, answering from a table of exit codes per check."""

    def __init__(
        self,
        codes: dict[str, int] | None = None,
        *,
        caps: CapabilitiesResponse | None = None,
        source: str = "/nonexistent",
        prepare: Exception | None = None,
        on_call: Callable[[str], None] | None = None,
    ) -> None:
        self.codes = codes or {}
        self.caps = caps or CapabilitiesResponse(
            can_build=True,
            can_run_poc=True,
            poc_count=2,
            has_function_test=True,
            has_intent_test=True,
        )
        self.source = source
        self.prepare = prepare
        self.on_call = on_call
        self.calls: list[str] = []

    def capabilities(self) -> CapabilitiesResponse:
        return self.caps

    def project(self) -> ProjectResponse:
        return ProjectResponse(
            id="t",
            project="p",
            language="c",
            source=self.source,
            task_description=PublicDescription(issue="x"),
            scripts=PublicScripts(),
        )

    def prepare_grading(self, *, timeout: float | None) -> PrepareGradingResponse:
        self.calls.append("prepare_grading")
        if self.prepare is not None:
            raise self.prepare
        return PrepareGradingResponse(success=True, patch_bytes=10)

    def bencher(
        self, action: Action, request: BencherRequest, *, timeout: float | None
    ) -> BencherResponse:
        assert request.grading, "grading checks must ask for the graded tree"
        name = action if request.poc is None else f"{action}:{request.poc}"
        self.calls.append(name)
        if self.on_call:
            self.on_call(name)
        code = self.codes.get(name, 0)
        return BencherResponse(code=code, stdout=f"{name} out\n", stderr=f"{name} err\n")


def test_a_patch_that_passes_every_check_is_passed_and_checks_run_in_order() -> None:
    api = FakeGrading()
    found = grade(api, Deadline(60))
    assert api.calls == [
        "prepare_grading",
        "build",
        "run_poc:0",
        "run_poc:1",
        "function_test",
        "intent_test",
    ]
    assert found.patch_result() == PatchResult(
        status="passed",
        build_success=True,
        pov_passed=2,
        pov_total=2,
        func_test_success=True,
        intent_test_success=True,
    )


def test_a_failing_build_stops_grading_and_leaves_the_other_checks_null() -> None:
    api = FakeGrading({"build": 2})
    result = grade(api, Deadline(60)).patch_result()
    assert api.calls == ["prepare_grading", "build"]
    assert result.status == "failed"
    assert result.build_success is False
    assert (result.pov_passed, result.pov_total) == (None, None)
    assert result.func_test_success is None and result.intent_test_success is None
    assert result.error_msg == "build failed: build.sh exited with status 2"
    assert result.error_log is not None and "build err" in result.error_log


def test_every_poc_runs_and_the_first_failure_is_the_error() -> None:
    api = FakeGrading({"run_poc:0": 1, "run_poc:1": 1, "intent_test": 1})
    result = grade(api, Deadline(60)).patch_result()
    assert "run_poc:1" in api.calls and "intent_test" in api.calls
    assert result.status == "failed"
    assert (result.pov_passed, result.pov_total) == (0, 2)
    assert result.func_test_success is True
    assert result.intent_test_success is False
    assert result.error_msg is not None and result.error_msg.startswith("PoC 1 of 2")
    assert result.error_log is not None and "run_poc:0 err" in result.error_log


def test_a_task_without_checks_grades_as_an_error() -> None:
    caps = CapabilitiesResponse(
        can_build=False,
        can_run_poc=False,
        poc_count=0,
        has_function_test=False,
        has_intent_test=False,
    )
    result = grade(FakeGrading(caps=caps), Deadline(60)).patch_result()
    assert result.status == "error"
    assert result.error_msg == "no check ran: the task has none"


def test_only_the_checks_the_task_has_run_and_the_rest_stay_null() -> None:
    caps = CapabilitiesResponse(
        can_build=True,
        can_run_poc=False,
        poc_count=0,
        has_function_test=True,
        has_intent_test=False,
    )
    api = FakeGrading(caps=caps)
    result = grade(api, Deadline(60)).patch_result()
    assert api.calls == ["prepare_grading", "build", "function_test"]
    assert result.status == "passed"
    assert result.pov_total is None and result.intent_test_success is None


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("patch_did_not_apply", "patch did not apply to /ssebench-repo: error: a.c: patch failed"),
        ("tree_unreadable", "the source tree /src/p cannot be read: its owner model took"),
    ],
)
def test_a_diff_the_agent_made_ungradable_is_failed_with_the_reason(code: str, reason: str) -> None:
    refusal = DaemonRefusedError(
        "prepare_grading",
        Reply(409, json.dumps({"error": reason, "code": code}).encode()),
    )
    result = grade(FakeGrading(prepare=refusal), Deadline(60)).patch_result()
    assert result.status == "failed"
    assert result.error_msg == f"the agent's diff cannot be graded: {reason}"
    assert result.build_success is None


def test_a_prepare_grading_the_daemon_failed_is_an_error_that_names_the_reason() -> None:
    refusal = DaemonRefusedError(
        "prepare_grading",
        Reply(500, b'{"error": "taking the diff failed: git crashed", "code": "internal_error"}'),
    )
    result = grade(FakeGrading(prepare=refusal), Deadline(60)).patch_result()
    assert result.status == "error"
    assert result.error_msg is not None and "git crashed" in result.error_msg
    assert result.build_success is None


def test_running_out_of_time_is_an_evaluator_timeout_with_the_checks_that_ran() -> None:
    now = [0.0]
    deadline = Deadline(10, clock=lambda: now[0])

    def tick(name: str) -> None:
        if name == "run_poc:0":
            now[0] = 11.0

    found = grade(FakeGrading(on_call=tick), deadline)
    result = found.patch_result()
    assert found.timed_out
    assert result.status == "error"
    assert result.build_success is True
    assert result.pov_total is None
    assert result.error_msg is not None and "time limit" in result.error_msg


def test_a_check_that_outlasts_the_deadline_is_an_evaluator_timeout() -> None:
    def hang(name: str) -> None:
        if name == "function_test":
            raise TimeoutError("no answer")

    found = grade(FakeGrading(on_call=hang), Deadline(60))
    assert found.timed_out and found.patch_result().status == "error"


def test_evaluate_writes_result_json_with_the_agents_figures(tmp_path: Path) -> None:
    options = EvaluatorOptions(
        results_dir=tmp_path,
        timeout=60,
        agent_duration=12.5,
        agent_exit_code=124,
        agent_timeout=True,
        source_archive=False,
    )
    evaluate(options, api=FakeGrading({"run_poc:1": 1}), say=lambda _: None)
    written = read_json(tmp_path / "result.json", Result)
    assert written.runtime_result == RuntimeResult(
        agent_duration=12.5, agent_timeout=True, evaluator_timeout=False, agent_exit_code=124
    )
    assert written.patch_result.status == "failed"
    assert written.patch_result.pov_passed == 1
    assert written.config is None
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"], "no temporary file is left"


class ArchiveWatch(FakeGrading):
    """Notes when the archive asks for the project (the first thing it does)."""

    def __init__(self, source: Path, **kwargs: Any) -> None:
        self.asked = threading.Event()
        super().__init__(source=str(source), **kwargs)

    def project(self) -> ProjectResponse:
        self.calls.append("project")
        self.asked.set()
        return super().project()


def test_the_source_archive_is_written_while_the_checks_run(tmp_path: Path) -> None:
    tree = tmp_path / "source"
    tree.mkdir()
    (tree / "lib.c").write_text("fixed\n")

    def last_check(name: str) -> None:
        # The archive must not wait for the grade: it has started before the last check ends.
        if name == "intent_test":
            assert api.asked.wait(30), "the archive did not start while the checks ran"

    api = ArchiveWatch(tree, on_call=last_check)
    results = tmp_path / "results"
    results.mkdir()
    evaluate(EvaluatorOptions(results_dir=results, timeout=60), api=api, say=lambda _: None)
    assert api.calls.index("prepare_grading") < api.calls.index("project")
    with tarfile.open(results / "source.tar.gz") as tar:
        assert tar.extractfile("source/lib.c").read() == b"fixed\n"  # type: ignore[union-attr]
    assert sorted(p.name for p in results.iterdir()) == ["result.json", "source.tar.gz"]


def test_the_archive_is_still_written_when_grading_stops_before_it_is_prepared(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "source"
    tree.mkdir()
    refused = DaemonRefusedError("preparing grading", Reply(status=409, body=b"{}"))
    api = ArchiveWatch(tree, prepare=refused)
    results = tmp_path / "results"
    results.mkdir()
    evaluate(EvaluatorOptions(results_dir=results, timeout=60), api=api, say=lambda _: None)
    assert read_json(results / "result.json", Result).patch_result.status == "error"
    assert (results / "source.tar.gz").is_file()


def test_no_archive_is_written_when_it_is_not_asked_for(tmp_path: Path) -> None:
    api = ArchiveWatch(tmp_path)
    evaluate(
        EvaluatorOptions(results_dir=tmp_path, timeout=60, source_archive=False),
        api=api,
        say=lambda _: None,
    )
    assert "project" not in api.calls
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_result_json_replaces_a_planted_link_instead_of_writing_through_it(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    results = tmp_path / "results"
    results.mkdir()
    (results / "result.json").symlink_to(victim)
    write_result(results, crash_result(EvaluatorOptions(), RuntimeError("boom")))
    assert victim.read_text() == "untouched\n"
    assert not (results / "result.json").is_symlink()
    assert read_json(results / "result.json", Result).patch_result.status == "error"


def test_a_crash_is_recorded_as_an_error_with_its_traceback() -> None:
    try:
        raise ValueError("the evaluator broke")
    except ValueError as exc:
        result = crash_result(EvaluatorOptions(agent_exit_code=3), exc)
    assert result.patch_result.status == "error"
    assert result.patch_result.error_msg == "the evaluator crashed: ValueError: the evaluator broke"
    assert "Traceback" in (result.patch_result.error_log or "")
    assert result.runtime_result.agent_exit_code == 3


def test_the_source_archive_keeps_links_as_links_and_leaves_out_foreign_hard_links(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "src"
    (tree / "dir").mkdir(parents=True)
    (tree / "dir" / "a.c").write_text("int a;\n")
    (tree / "passwd-link").symlink_to("/etc/passwd")
    (tree / "dir-link").symlink_to("/etc")
    results = tmp_path / "results"
    results.mkdir()
    foreign = tmp_path / "foreign"
    foreign.write_text("not the agent's\n")
    if os.geteuid() == 0:
        os.chown(foreign, 54321, 54321)
        os.link(foreign, tree / "hardlink")
    path, skipped = write_source_archive(tree, results)
    with tarfile.open(path) as tar:
        members = {member.name: member for member in tar.getmembers()}
        assert tar.extractfile("src/dir/a.c").read() == b"int a;\n"  # type: ignore[union-attr]
    assert members["src/passwd-link"].issym()
    assert members["src/passwd-link"].linkname == "/etc/passwd"
    assert members["src/dir-link"].issym()
    assert not any(name.startswith("src/dir-link/") for name in members)
    if os.geteuid() == 0:
        assert "src/hardlink" not in members
        assert skipped == ["src/hardlink"]


def test_the_source_archive_leaves_out_files_past_the_size_limit(tmp_path: Path) -> None:
    tree = tmp_path / "src"
    tree.mkdir()
    (tree / "small.c").write_text("int x;\n")
    with (tree / "sparse.bin").open("wb") as sparse:
        sparse.truncate(MAX_ARCHIVED_FILE + 1)
    results = tmp_path / "results"
    results.mkdir()
    path, skipped = write_source_archive(tree, results)
    assert skipped == ["src/sparse.bin"]
    with tarfile.open(path) as tar:
        assert sorted(tar.getnames()) == ["src", "src/small.c"]
    assert path.stat().st_size < 1024 * 1024


# -- the real daemon ----------------------------------------------------------------


def _options(running: Running) -> EvaluatorOptions:
    return EvaluatorOptions(
        admin_socket=running.config.admin_socket,
        results_dir=running.config.results_dir,
        timeout=120,
        agent_duration=1.0,
        agent_exit_code=0,
    )


def test_the_unmodified_tree_fails_with_every_poc_triggering_on_the_real_daemon(
    running: Running,
) -> None:
    result = evaluate(_options(running), say=lambda _: None)
    assert result.patch_result == PatchResult(
        status="failed",
        build_success=True,
        pov_passed=0,
        pov_total=2,
        func_test_success=True,
        intent_test_success=False,
        error_msg="PoC 1 of 2 still triggers the bug: run.sh exited with status 1",
        error_log=result.patch_result.error_log,
    )
    assert "triggered by POC-ONE" in (result.patch_result.error_log or "")
    results = running.config.results_dir
    assert read_json(results / "result.json", Result) == result
    with tarfile.open(results / "source.tar.gz") as tar:
        assert tar.extractfile("source/lib.txt").read() == b"bug\n"  # type: ignore[union-attr]


def test_the_reference_fix_passes_every_check_on_the_real_daemon(running: Running) -> None:
    source = Path(running.daemon.task.source)
    (source / "lib.txt").write_text("fixed\n")
    result = evaluate(_options(running), say=lambda _: None)
    assert result.patch_result == PatchResult(
        status="passed",
        build_success=True,
        pov_passed=2,
        pov_total=2,
        func_test_success=True,
        intent_test_success=True,
    )
    assert (running.config.results_dir / "final.patch").read_text().count("+fixed") == 1


def test_the_command_line_records_an_error_when_no_daemon_answers(tmp_path: Path) -> None:
    status = main(
        [
            "--admin-socket",
            str(tmp_path / "missing.sock"),
            "--results",
            str(tmp_path),
            "--timeout",
            "5",
            "--agent-exit-code",
            "0",
        ]
    )
    assert status == 0
    result = read_json(tmp_path / "result.json", Result)
    assert result.patch_result.status == "error"
    assert "nothing answers" in (result.patch_result.error_msg or "")


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_the_command_line_refuses_a_time_limit_that_is_not_positive(value: str) -> None:
    with pytest.raises(SystemExit):
        main(["--timeout", value])
