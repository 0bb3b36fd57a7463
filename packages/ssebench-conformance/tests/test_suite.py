"""The suite's own machinery: the runner, known failures (strict), capabilities, the probe."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import ssebench.conformance
from ssebench.conformance import (
    CHECKS,
    KNOWN_FAILURES,
    Check,
    _checker_checks,
    _checks,
    _egress,
    capabilities,
    conformance_tests,
    probe_context,
    run_checks,
    select,
)
from ssebench.conformance.fake import FakeBackend, fake_probe_image
from ssebench.spec import Backend, ContainerRole, RunHandle, RunInfo, labels


class ForgetfulBackend(FakeBackend):
    """A fake that lists no run: it fails every check that looks runs up by label."""

    name = "forgetful"

    def list_runs(self, labels: dict[str, str] | None = None) -> list[RunInfo]:
        return []


class ExecBackend(FakeBackend):
    """A fake that claims to run commands in a run, so the exec checks apply to it."""

    name = "exec"
    supports_exec = True

    def exec_argv(
        self,
        handle: RunHandle,
        command: Sequence[str],
        *,
        user: str | None = None,
        workdir: str | None = None,
        tty: bool = False,
        stdin: bool = False,
        env_names: Sequence[str] = (),
        container: ContainerRole = "task",
    ) -> list[str]:
        return list(command)


def test_every_check_function_is_in_the_suite_once() -> None:
    defined = {
        name
        for module in (_checks, _checker_checks, _egress)
        for name, function in inspect.getmembers(module, inspect.isfunction)
        if function.__module__ == module.__name__ and not name.startswith("_")
    }
    names = [check.name for check in CHECKS]
    assert sorted(names) == sorted(defined)
    assert len(set(names)) == len(names)


def test_the_engine_free_part_leaves_out_what_needs_a_real_engine() -> None:
    free = select(engine=False)
    assert free and all(not check.engine for check in free)
    assert set(select()) == set(CHECKS)
    assert "a_run_streams_its_output_to_stdout_and_stderr" in [check.name for check in free]


def test_capabilities_are_the_methods_a_backend_overrides() -> None:
    assert capabilities(FakeBackend) == frozenset()
    assert capabilities(ExecBackend()) == {"exec"}
    assert capabilities(Backend) == frozenset()


def test_a_check_applies_by_what_the_backend_offers_or_lacks() -> None:
    check = Check(_checks.inspecting_an_unknown_run_gives_none, needs=frozenset({"exec"}))
    assert check.applies_to(frozenset({"exec"})) and not check.applies_to(frozenset())
    refusal = Check(_checks.inspecting_an_unknown_run_gives_none, lacks=frozenset({"exec"}))
    assert refusal.applies_to(frozenset()) and not refusal.applies_to(frozenset({"exec"}))
    assert refusal.why_not("x", frozenset({"exec"})).startswith("the x backend offers exec")


@pytest.mark.process
def test_the_runner_finds_the_fake_conforming() -> None:
    report = run_checks(FakeBackend, fake_probe_image, engine=False)
    assert report.ok, str(report)
    statuses = {outcome.check: outcome.status for outcome in report.outcomes}
    assert statuses["the_endpoint_of_a_finished_run_is_an_error"] == "not applicable"
    assert statuses["a_kept_run_is_waited_for_until_its_grade_and_survives_cleanup"] == "passed"


@pytest.mark.process
def test_the_runner_reports_a_failing_check_with_what_went_wrong() -> None:
    report = run_checks(ForgetfulBackend, fake_probe_image, engine=False)
    assert not report.ok
    failed = {o.check: o.detail for o in report.outcomes if o.status == "failed"}
    assert "runs_are_found_by_their_labels" in failed
    assert failed["runs_are_found_by_their_labels"].startswith("AssertionError")
    assert "inspecting_an_unknown_run_gives_none" not in failed


@pytest.mark.process
def test_a_known_failure_is_expected_and_one_that_passes_fails_the_suite() -> None:
    known = {
        "runs_are_found_by_their_labels": "it forgets its runs",
        "wait_returns_the_exit_status_of_the_run": "listed by mistake",
    }
    report = run_checks(ForgetfulBackend, fake_probe_image, known_failures=known, engine=False)
    statuses = {outcome.check: outcome.status for outcome in report.outcomes}
    assert statuses["runs_are_found_by_their_labels"] == "known failure"
    assert statuses["wait_returns_the_exit_status_of_the_run"] == "fixed"
    assert not report.ok


def test_a_known_failures_map_naming_no_check_is_refused() -> None:
    with pytest.raises(ValueError, match="lacks: no_such_check"):
        conformance_tests(known_failures={"no_such_check": "typo"})


def test_the_built_in_maps_name_only_checks_of_the_suite() -> None:
    names = {check.name for check in CHECKS}
    for backend, known in KNOWN_FAILURES.items():
        assert set(known) <= names, backend


@pytest.mark.process
def test_a_backend_whose_flag_disagrees_with_its_methods_fails_the_flag_check() -> None:
    class Claims(FakeBackend):
        supports_exec = True

    report = run_checks(Claims, fake_probe_image, engine=False)
    statuses = {outcome.check: outcome.status for outcome in report.outcomes}
    assert statuses["the_flags_agree_with_the_methods"] == "failed"


def test_the_probe_image_ships_in_the_package() -> None:
    context = probe_context()
    assert (context / "Dockerfile").is_file()
    probe = (context / "probe.sh").read_text()
    for mode in ("talk)", "sleep)", "keep)", "serve)", "connect)"):
        assert mode in probe


def test_the_public_api_is_sorted_and_real() -> None:
    names = ssebench.conformance.__all__
    constants = [n for n in names if n.isupper()]
    classes = [n for n in names if n[0].isupper() and not n.isupper()]
    functions = [n for n in names if n[0].islower()]
    assert names == sorted(constants) + sorted(classes) + sorted(functions)
    assert all(hasattr(ssebench.conformance, name) for name in names)


PYTEST_SUITE = """
import pytest
from ssebench.conformance import conformance_tests
from ssebench.conformance.fake import FakeBackend, fake_probe_image
from ssebench.spec import RunInfo


class Forgetful(FakeBackend):
    name = "forgetful"

    def list_runs(self, labels=None):
        return []


@pytest.fixture
def conformance_backend_factory():
    return Forgetful


@pytest.fixture
def conformance_probe_image_factory():
    return fake_probe_image


test_conformance = conformance_tests(
    engine=False,
    known_failures={KNOWN},
)
"""


def run_pytest(
    folder: Path, known: dict[str, str], *select: str
) -> subprocess.CompletedProcess[str]:
    (folder / "test_suite_of_forgetful.py").write_text(PYTEST_SUITE.replace("{KNOWN}", repr(known)))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rxXf", *select],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.mark.process
def test_under_pytest_a_known_failure_is_a_strict_expected_failure(tmp_path: Path) -> None:
    known = {"runs_are_found_by_their_labels": "it forgets its runs"}
    outcome = run_pytest(tmp_path, known, "-k", "runs_are_found or inspecting_an_unknown")
    assert outcome.returncode == 0, outcome.stdout + outcome.stderr
    assert "1 passed, 20 deselected, 1 xfailed" in outcome.stdout


@pytest.mark.process
def test_under_pytest_a_known_failure_that_passes_fails(tmp_path: Path) -> None:
    known = {"inspecting_an_unknown_run_gives_none": "listed by mistake"}
    outcome = run_pytest(tmp_path, known, "-k", "inspecting_an_unknown")
    assert outcome.returncode == 1, outcome.stdout + outcome.stderr
    assert "[XPASS(strict)] listed by mistake" in outcome.stdout


def test_the_harness_removes_every_run_a_check_started(tmp_path: Path) -> None:
    backend = FakeBackend()
    seen: list[Any] = []

    def starts_two_and_fails(h: Any) -> None:
        seen.append(h.start("sleep")[0].run_id)
        seen.append(h.start("keep", keep=True)[0].run_id)
        raise AssertionError("the check fails; its runs still go")

    report = run_checks(lambda: backend, fake_probe_image, checks=[Check(starts_two_and_fails)])
    assert [o.status for o in report.outcomes] == ["failed"]
    for run_id in seen:
        assert backend.list_runs({labels.RUN_ID: run_id}) == []


@pytest.mark.process
def test_a_run_streams_through_the_capture_even_from_a_child_process() -> None:
    from ssebench.conformance._capture import capture_output

    with capture_output() as captured:
        print("from python")
        subprocess.run(["sh", "-c", "echo from a child; echo to stderr >&2"], check=True)
    assert captured.out == "from python\nfrom a child\n"
    assert captured.err == "to stderr\n"
