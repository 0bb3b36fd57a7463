"""The evaluator: grading order and rules on a fake daemon, then on the real wire."""

from __future__ import annotations

import json
import os
import re
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ssebench.daemon._budget import CHECK_MARGIN, GRADE_RESERVE, PREPARE_ALLOWANCE
from ssebench.daemon._client import Reply, refusal
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
from ssebench.daemon.evaluator._files import (
    MAX_ARCHIVED_FILE,
    link_stays_inside,
    write_source_archive,
)
from ssebench.daemon.evaluator._main import parse_options
from ssebench.spec import PatchResult, Result, RuntimeResult, contract, read_json

from .conftest import Running
from .fakes import TAG, tagged, write_script


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
        unrunnable: frozenset[str] = frozenset(),
        dropped: tuple[str, ...] = (),
    ) -> None:
        self.codes = codes or {}
        self.dropped = list(dropped)
        self.unrunnable = unrunnable
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
        self.limits: dict[str, tuple[float | None, float | None]] = {}
        """Each check's `timeout` as sent, and how long the evaluator would wait for it."""

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
        return PrepareGradingResponse(success=True, patch_bytes=10, dropped=self.dropped)

    def bencher(
        self, action: Action, request: BencherRequest, *, timeout: float | None
    ) -> BencherResponse:
        assert request.grading, "grading checks must ask for the graded tree"
        name = action if request.poc is None else f"{action}:{request.poc}"
        self.calls.append(name)
        self.limits[name] = (request.timeout, timeout)
        if self.on_call:
            self.on_call(name)
        if name in self.unrunnable:  # as the daemon answers when exec fails
            return BencherResponse(
                code=-1,
                stdout="",
                stderr="ssebench: cannot start: No such file or directory\n",
                runnable=False,
            )
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


def test_the_grade_lists_the_protected_paths_left_out_and_a_failure_says_so() -> None:
    dropped = ("conftest.py", "a/conftest.py", "b.pth", "c.pth", "setup.cfg", "tox.ini")
    failed = grade(FakeGrading({"function_test": 1}, dropped=dropped), Deadline(60))
    result = failed.patch_result()
    assert result.status == "failed"
    assert result.dropped == list(dropped)
    assert result.error_msg == (
        "function tests failed: test.sh exited with status 1 (graded without the agent's "
        "changes to protected paths: conftest.py, a/conftest.py, b.pth, c.pth, setup.cfg "
        "and 1 more)"
    )
    passed = grade(FakeGrading(dropped=("conftest.py",)), Deadline(60)).patch_result()
    assert (passed.status, passed.error_msg, passed.dropped) == ("passed", None, ["conftest.py"])


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
    assert result.error_source == "task"
    assert result.error_msg == "no check ran: the task has none"


@pytest.mark.parametrize("check", ["build", "run_poc:1", "function_test", "intent_test"])
def test_a_check_whose_script_cannot_be_executed_is_an_error_of_the_task(check: str) -> None:
    api = FakeGrading({"run_poc:0": 1}, unrunnable=frozenset({check}))
    result = grade(api, Deadline(60)).patch_result()
    assert api.calls[-1] == check, "grading stops at a broken task"
    assert result.status == "error"
    assert result.error_source == "task"
    action = check.split(":")[0]
    assert result.error_msg == f"the task is broken: its {action} check cannot execute its script"
    assert "cannot start: No such file or directory" in (result.error_log or "")


def test_a_check_that_runs_and_fails_is_failed_with_no_error_source() -> None:
    result = grade(FakeGrading({"function_test": 2}), Deadline(60)).patch_result()
    assert (result.status, result.error_source) == ("failed", None)


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
        ("diff_too_large", "the agent's diff is larger than 64 MiB, more than the daemon keeps"),
    ],
)
def test_a_diff_the_agent_made_ungradable_is_failed_with_the_reason(code: str, reason: str) -> None:
    refused = refusal(
        "prepare_grading",
        Reply(409, json.dumps({"error": reason, "code": code}).encode()),
    )
    result = grade(FakeGrading(prepare=refused), Deadline(60)).patch_result()
    assert result.status == "failed"
    assert result.error_msg == f"the agent's diff cannot be graded: {reason}"
    assert result.build_success is None


def test_a_prepare_grading_the_daemon_failed_is_an_error_that_names_the_reason() -> None:
    refused = refusal(
        "prepare_grading",
        Reply(500, b'{"error": "taking the diff failed: git crashed", "code": "internal_error"}'),
    )
    result = grade(FakeGrading(prepare=refused), Deadline(60)).patch_result()
    assert result.status == "error"
    assert result.error_source == "harness"
    assert result.error_msg is not None and "git crashed" in result.error_msg
    assert result.build_success is None


def test_running_out_of_time_is_an_evaluator_timeout_with_the_checks_that_ran() -> None:
    now = [0.0]
    deadline = Deadline(100, clock=lambda: now[0])

    def tick(name: str) -> None:
        if name == "run_poc:0":  # the daemon answered, far past the check's limit
            now[0] = 101.0

    found = grade(FakeGrading(on_call=tick), deadline)
    result = found.patch_result()
    assert found.timed_out
    assert result.status == "error"
    assert result.error_source == "harness"
    assert result.build_success is True
    assert result.pov_total is None
    assert result.error_msg is not None and "time limit" in result.error_msg


def test_a_daemon_that_does_not_answer_a_check_within_its_limit_is_an_infrastructure_error() -> (
    None
):
    def hang(name: str) -> None:
        if name == "function_test":
            raise TimeoutError("no answer from admin.sock within 220 s")

    found = grade(FakeGrading(on_call=hang), Deadline(10_000, check_timeout=100))
    result = found.patch_result()
    assert found.infrastructure_error and not found.timed_out
    assert result.status == "error"
    assert result.error_msg == "grading lost the daemon: no answer from admin.sock within 220 s"
    assert (result.pov_passed, result.pov_total) == (2, 2)


def test_a_daemon_that_does_not_say_which_checks_there_are_is_an_infrastructure_error() -> None:
    class Silent(FakeGrading):
        def capabilities(self) -> CapabilitiesResponse:
            raise TimeoutError("no answer from admin.sock within 30 s")

    found = grade(Silent(), Deadline(check_timeout=100))
    assert found.infrastructure_error and not found.timed_out
    assert found.error_msg == "grading lost the daemon: no answer from admin.sock within 30 s"


def test_a_request_cut_short_by_the_spent_budget_is_an_evaluator_timeout() -> None:
    now = [0.0]
    deadline = Deadline(1000, clock=lambda: now[0])

    def hang(name: str) -> None:
        if name == "function_test":
            now[0] = 1000 - deadline.reserve  # waited for all the budget may give
            raise TimeoutError("no answer")

    found = grade(FakeGrading(on_call=hang), deadline)
    assert found.timed_out and not found.infrastructure_error
    result = found.patch_result()
    assert result.status == "error"
    assert result.error_msg == (
        "the evaluator's time limit (1000 s) ran out while waiting for the daemon"
    )
    assert result.error_source == "harness"


class Hanging(FakeGrading):
    """Requests that take time on a fake clock: prepare_grading `prepare` seconds;
    the checks named in `hang` run until the daemon stops them at the limit they
    were sent with, and the daemon then takes `cleanup` more seconds to answer;
    the other checks take `quick` seconds."""

    def __init__(
        self,
        now: list[float],
        hang: set[str],
        *,
        prepare: float = 0.0,
        cleanup: float = 0.0,
        quick: float = 1.0,
    ) -> None:
        super().__init__()
        self.now, self.hang = now, hang
        self.prepare_takes, self.cleanup, self.quick = prepare, cleanup, quick

    def prepare_grading(self, *, timeout: float | None) -> PrepareGradingResponse:
        self.limits["prepare_grading"] = (None, timeout)
        self.now[0] += self.prepare_takes
        return super().prepare_grading(timeout=timeout)

    def bencher(
        self, action: Action, request: BencherRequest, *, timeout: float | None
    ) -> BencherResponse:
        answer = super().bencher(action, request, timeout=timeout)
        name = self.calls[-1]
        if name not in self.hang:
            self.now[0] += self.quick
            return answer
        assert request.timeout is not None and timeout is not None
        assert timeout >= request.timeout + self.cleanup, "the evaluator gave up too early"
        self.now[0] += request.timeout + self.cleanup
        return BencherResponse(
            code=-1,
            stdout="",
            stderr=f"ssebench: check stopped after {request.timeout:g} s\n",
            timed_out=True,
        )


def test_each_check_is_sent_with_its_share_of_what_is_left_of_the_budget() -> None:
    now = [0.0]
    # A budget below what the checks could use: reserve 30 s, margin 100 s a check.
    deadline = Deadline(1000, check_timeout=1800, clock=lambda: now[0])
    api = Hanging(now, hang=set(), quick=10.0)
    assert grade(api, deadline).patch_result().status == "passed"
    assert api.limits["prepare_grading"] == (None, 900)
    # (1000 - 30) / 5 - 100 for the build; then what the build left, over four.
    assert api.limits["build"] == (pytest.approx(94), pytest.approx(194))
    assert api.limits["run_poc:0"] == (
        pytest.approx((1000 - 10 - 30) / 4 - 100),
        pytest.approx(140 + 100),
    )
    sent = [api.limits[name][0] for name in api.calls[1:]]
    assert sent == sorted(sent), "a check that ends early leaves more for the rest"


def test_a_budget_left_open_holds_every_check_at_its_full_limit() -> None:
    now = [0.0]
    deadline = Deadline(check_timeout=50, clock=lambda: now[0])
    api = Hanging(now, hang=set())
    assert grade(api, deadline).patch_result().status == "passed"
    assert deadline.seconds == PREPARE_ALLOWANCE + 5 * (50 + CHECK_MARGIN) + GRADE_RESERVE
    for name in api.calls[1:]:
        assert api.limits[name] == (50, 50 + CHECK_MARGIN), name


def test_a_poc_that_hangs_fails_with_its_limit_and_the_other_checks_still_run() -> None:
    now = [0.0]
    api = Hanging(now, hang={"run_poc:0"})
    found = grade(api, Deadline(check_timeout=50, clock=lambda: now[0]))
    result = found.patch_result()
    assert not found.timed_out and not found.infrastructure_error
    assert api.calls[1:] == ["build", "run_poc:0", "run_poc:1", "function_test", "intent_test"]
    assert result.status == "failed"
    assert (result.pov_passed, result.pov_total) == (1, 2)
    assert result.func_test_success is True and result.intent_test_success is True
    assert result.error_msg == "PoC 1 of 2 did not finish within 50 s (run.sh was stopped)"
    assert "check stopped after 50 s" in (result.error_log or "")
    assert "(the check was stopped at its time limit)" in (result.error_log or "")


def test_a_patch_whose_every_check_hangs_is_failed_not_an_evaluator_timeout() -> None:
    # The worst the daemon may take: prepare_grading all its allowance, and every check
    # its whole limit and then the whole margin to answer. The budget still holds it all.
    now = [0.0]
    names = {"run_poc:0", "run_poc:1", "function_test", "intent_test"}
    api = Hanging(now, hang=names, prepare=PREPARE_ALLOWANCE, cleanup=CHECK_MARGIN)
    found = grade(api, Deadline(check_timeout=50, clock=lambda: now[0]))
    result = found.patch_result()
    assert not found.timed_out, result.error_msg
    assert result.status == "failed"
    assert (result.pov_passed, result.pov_total) == (0, 2)
    assert result.func_test_success is False and result.intent_test_success is False
    assert [api.limits[name][0] for name in sorted(names)] == [pytest.approx(50)] * 4
    assert found.notes[-1] == (
        "intent tests failed: the hidden tests with test.sh did not finish within 50 s"
    )


def test_a_build_that_hangs_is_a_failed_build() -> None:
    now = [0.0]
    api = Hanging(now, hang={"build"})
    result = grade(api, Deadline(check_timeout=50, clock=lambda: now[0])).patch_result()
    assert result.status == "failed"
    assert result.error_msg == "build failed: build.sh did not finish within 50 s"
    assert api.calls == ["prepare_grading", "build"]


def test_a_budget_the_harness_has_spent_is_an_error_before_a_check_gets_too_little() -> None:
    now = [0.0]
    deadline = Deadline(1000, clock=lambda: now[0])

    def slow(name: str) -> None:
        if name == "build":
            now[0] = 880.0  # the daemon took its time answering: 90 s left, 4 checks to go

    found = grade(FakeGrading(on_call=slow), deadline)
    assert found.timed_out
    assert found.patch_result().status == "error"
    assert found.error_msg == (
        "the evaluator's time limit (1000 s) ran out: "
        "0.0 s left for each of the 4 checks still to run"
    )


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
    assert result.patch_result.error_source == "harness"
    assert result.patch_result.error_msg == "the evaluator crashed: ValueError: the evaluator broke"
    assert "Traceback" in (result.patch_result.error_log or "")
    assert result.runtime_result.agent_exit_code == 3


def test_the_source_archive_keeps_links_inside_the_tree_and_leaves_out_the_rest(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "src"
    (tree / "dir" / "sub").mkdir(parents=True)
    (tree / "dir" / "a.c").write_text("int a;\n")
    (tree / "inside-link").symlink_to("dir/a.c")
    (tree / "dir" / "sub" / "up-link").symlink_to("../../dir/a.c")
    (tree / "passwd-link").symlink_to("/etc/passwd")
    (tree / "dir-link").symlink_to("/etc")
    (tree / "result-link").symlink_to("../results/result.json")
    (tree / "dir" / "climb").symlink_to("../../outside")
    # Each link of this chain stays inside on its own; together they would lead out.
    (tree / "dir" / "here").symlink_to(".")
    (tree / "dir" / "chain").symlink_to("here/../..")
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
    assert members["src/inside-link"].issym()
    assert members["src/inside-link"].linkname == "dir/a.c"
    assert members["src/dir/sub/up-link"].linkname == "../../dir/a.c"
    assert members["src/dir/here"].linkname == "."
    left_out = [
        "src/passwd-link",
        "src/dir-link",
        "src/result-link",
        "src/dir/climb",
        "src/dir/chain",
    ]
    if os.geteuid() == 0:
        left_out.append("src/hardlink")
    assert sorted(skipped) == sorted(left_out)
    assert not set(left_out) & set(members)
    # Python's own guard for untrusted archives finds nothing to refuse.
    out = tmp_path / "out"
    with tarfile.open(path) as tar:
        tar.extractall(out, filter="data")
    assert (out / "src" / "dir" / "sub" / "up-link").read_text() == "int a;\n"


@pytest.mark.parametrize(
    ("name", "target", "inside"),
    [
        ("src/l", "a/b", True),
        ("src/l", "./a//b", True),
        ("src/d/l", "../a", True),
        ("src/d/e/l", "../../a", True),
        ("src/l", "..", False),
        ("src/d/l", "../../a", False),
        ("src/l", "/etc/passwd", False),
        ("src/l", "a/../b", False),
        ("src/l", "", False),
        ("src", "src", False),
    ],
)
def test_a_link_member_stays_only_when_it_cannot_lead_out(
    name: str, target: str, inside: bool
) -> None:
    assert link_stays_inside(name, target) is inside


@pytest.mark.skipif(os.geteuid() != 0, reason="owning files as the agent and setuid bits need root")
def test_every_member_of_the_source_archive_is_roots_without_special_or_shared_write_bits(
    tmp_path: Path,
) -> None:
    agent = 54322
    tree = tmp_path / "src"
    (tree / "shared").mkdir(parents=True)
    for name, mode in (("suid", 0o4755), ("sgid", 0o2775), ("world", 0o666), ("plain", 0o644)):
        (tree / name).write_text(name)
        os.chown(tree / name, agent, agent)
        (tree / name).chmod(mode)
    (tree / "shared").chmod(0o1777)
    for path in (tree, tree / "shared"):
        os.chown(path, agent, agent)
    results = tmp_path / "results"
    results.mkdir()
    path, skipped = write_source_archive(tree, results)
    assert skipped == []
    with tarfile.open(path) as tar:
        members = {member.name: member for member in tar.getmembers()}
    assert {name: oct(member.mode) for name, member in members.items()} == {
        "src": "0o755",
        "src/shared": "0o755",
        "src/suid": "0o755",
        "src/sgid": "0o755",
        "src/world": "0o644",
        "src/plain": "0o644",
    }
    for member in members.values():
        assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", "")


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


@pytest.mark.process
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


@pytest.mark.process
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


@pytest.mark.process
def test_a_patch_that_makes_a_poc_hang_fails_that_poc_within_the_budget_on_the_real_daemon(
    start_daemon: Callable[..., Running],
) -> None:
    # The daemon would let a check run 300 s; the evaluator's budget is 40 s, so the
    # hanging PoC must be stopped at its share of it, and every other check still run.
    running = start_daemon(check_timeout=300.0)
    write_script(
        running.config.task_dir / "scripts" / "run.sh",
        """\
        #!/bin/bash
        if grep -q hang built.txt && grep -q POC-ONE "$1"; then echo extracting; sleep 600; fi
        grep -q fixed built.txt
        """,
    )
    (Path(running.daemon.task.source) / "lib.txt").write_text("fixed, but hang on the first\n")
    options = replace(_options(running), timeout=40, check_timeout=300)
    began = time.monotonic()
    result = evaluate(options, say=lambda _: None)
    assert time.monotonic() - began < 30
    patch = result.patch_result
    assert patch.status == "failed", patch.error_msg
    assert result.runtime_result.evaluator_timeout is False
    assert (patch.build_success, patch.pov_passed, patch.pov_total) == (True, 1, 2)
    assert patch.func_test_success is True and patch.intent_test_success is True
    stopped = re.fullmatch(
        r"PoC 1 of 2 did not finish within ([\d.]+) s \(run\.sh was stopped\)",
        patch.error_msg or "",
    )
    assert stopped, patch.error_msg
    # (40 s - 4 s of reserve) / 4 checks left - 4 s of margin, less what the build took.
    assert 2 < float(stopped[1]) <= 5
    assert "extracting" in (patch.error_log or "")
    assert "the time limit of this request" in (patch.error_log or "")
    assert tagged(running.privileges.extra_env[TAG]) == []


@pytest.mark.process
def test_a_script_whose_interpreter_is_missing_is_an_error_of_the_task_on_the_real_daemon(
    running: Running,
) -> None:
    build = running.config.task_dir / "scripts" / "build.sh"
    write_script(build, "#!/nonexistent/interpreter\necho never\n")
    result = evaluate(_options(running), say=lambda _: None)
    assert result.patch_result.status == "error"
    assert result.patch_result.error_source == "task"
    assert result.patch_result.build_success is None
    assert "cannot start" in (result.patch_result.error_log or "")


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


@pytest.mark.parametrize("value", ["0", "soon", "inf"])
def test_a_bad_check_timeout_in_the_environment_is_refused_not_replaced(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The one parser of SSE_CHECK_TIMEOUT (`ssebench.daemon._environ`): a bad value is a
    usage error naming it, never the default in silence."""
    with pytest.raises(SystemExit) as ended:
        parse_options([], {"SSE_CHECK_TIMEOUT": value})
    assert ended.value.code == 2
    assert f"SSE_CHECK_TIMEOUT={value!r}" in capsys.readouterr().err


def test_the_check_timeout_comes_from_the_command_line_then_the_environment() -> None:
    assert parse_options([], {"SSE_CHECK_TIMEOUT": "42"}).check_timeout == 42.0
    given = parse_options(["--check-timeout", "7"], {"SSE_CHECK_TIMEOUT": "soon"})
    assert given.check_timeout == 7.0
    assert parse_options([], {}).check_timeout == float(contract.DEFAULT_CHECK_TIMEOUT)
