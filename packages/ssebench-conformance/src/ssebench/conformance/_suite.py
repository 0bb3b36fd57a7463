"""The suite: every check in order, the known failures of each backend, and a small runner.

The runner needs no pytest: `run_checks(DockerBackend, make_probe_image)` runs
each check that applies to the backend on a harness of its own and reports
what happened, a known failure that passed counting as a failure (strict).
"""

from __future__ import annotations

import tempfile
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from typing_extensions import override

from ssebench.conformance import _checker_checks as k
from ssebench.conformance import _checks as c
from ssebench.conformance import _egress as e
from ssebench.conformance._check import Capability, Check, capabilities
from ssebench.conformance._harness import BackendFactory, Harness, ProbeImageFactory, Suite
from ssebench.spec import Mode

_ENDPOINT: Final[frozenset[Capability]] = frozenset({"endpoint"})
_EXEC: Final[frozenset[Capability]] = frozenset({"exec"})

CHECKS: Final[tuple[Check, ...]] = (
    Check(c.the_flags_agree_with_the_methods),
    Check(c.inspecting_an_unknown_run_gives_none),
    Check(c.listing_runs_by_labels_nobody_has_gives_nothing),
    Check(c.a_run_streams_its_output_to_stdout_and_stderr),
    Check(c.wait_returns_the_exit_status_of_the_run),
    Check(c.wait_raises_timeout_error_when_the_run_outlasts_it),
    Check(c.a_stopped_run_ends_with_128_plus_sigterm),
    Check(c.stop_is_safe_after_exit_and_more_than_once),
    Check(c.results_are_in_the_run_directory_after_collect_results),
    Check(c.logs_yield_the_output_one_line_at_a_time),
    Check(c.logs_follow_until_the_run_exits),
    Check(c.runs_are_found_by_their_labels),
    Check(c.cleanup_leaves_nothing_of_the_run),
    Check(c.a_kept_run_is_waited_for_until_its_grade_and_survives_cleanup),
    Check(c.remove_takes_away_a_kept_running_run),
    Check(c.a_run_whose_image_is_missing_leaves_nothing_behind),
    Check(c.copy_from_image_copies_one_file),
    Check(c.copy_from_image_raises_a_backend_error_for_a_missing_file),
    Check(c.the_endpoint_reaches_a_port_of_the_running_run, needs=_ENDPOINT, engine=True),
    Check(c.the_endpoint_of_either_container_reaches_the_run, needs=_ENDPOINT, engine=True),
    Check(c.the_endpoint_of_a_finished_run_is_an_error, needs=_ENDPOINT),
    Check(c.without_endpoints_asking_for_one_is_a_backend_error, lacks=_ENDPOINT),
    Check(c.exec_argv_runs_a_command_and_passes_variables_by_name_only, needs=_EXEC, engine=True),
    Check(
        c.exec_argv_reaches_the_task_container_by_default_and_the_agents_on_request,
        needs=_EXEC,
        engine=True,
    ),
    Check(c.without_exec_asking_for_a_command_is_a_backend_error, lacks=_EXEC),
    Check(c.a_planted_secret_never_surfaces_outside_the_container),
    Check(
        k.a_checker_pairs_agent_runs_as_model_alone_without_capabilities_or_the_results, engine=True
    ),
    Check(k.a_checker_pair_ends_with_its_checker_told_the_agents_exit_status, engine=True),
    Check(
        k.commands_in_a_checker_pairs_agent_container_run_as_model_only, needs=_EXEC, engine=True
    ),
    Check(e.a_restricted_run_reaches_neither_the_host_nor_the_internet_standin, engine=True),
    Check(
        e.a_restricted_run_with_its_endpoint_still_reaches_neither_the_host_nor_the_internet,
        needs=_ENDPOINT,
        engine=True,
    ),
    Check(e.a_restricted_run_cannot_reach_another_runs_daemon_port, needs=_ENDPOINT, engine=True),
    Check(e.an_open_run_reaches_the_host_and_the_internet_standin, engine=True),
    Check(e.the_host_still_reaches_a_restricted_runs_daemon_port, needs=_ENDPOINT, engine=True),
)
"""Every check, in the order they run."""

KNOWN_FAILURES: Final[Mapping[str, Mapping[str, str]]] = {
    "docker": {},
    "fake": {},
}
"""For each built-in backend, the checks it is known to fail and why.

Applied as strict expected failures: a known failure that starts passing
fails the suite until its line is removed. Both built-in backends pass every
check that applies to them today; a new backend (Kubernetes) starts its map
with what it cannot do yet.
"""


def select(engine: bool = True) -> tuple[Check, ...]:
    """The checks to run: all of them, or only the engine-free part (`engine=False`)."""
    return tuple(check for check in CHECKS if engine or not check.engine)


def validate_known_failures(known: Mapping[str, str]) -> None:
    """Refuse a map that names a check the suite does not have (a typo would hide nothing).

    Raises:
        ValueError: an unknown check name.
    """
    unknown = sorted(set(known) - {check.name for check in CHECKS})
    if unknown:
        raise ValueError(f"known failures name checks the suite lacks: {', '.join(unknown)}")


Status = Literal["passed", "failed", "known failure", "fixed", "not applicable"]


@dataclass(frozen=True)
class Outcome:
    """What one check did; `fixed` is a known failure that passed (a failure, strictly)."""

    check: str
    status: Status
    detail: str = ""


@dataclass(frozen=True)
class Report:
    """The outcomes of one suite run against one backend."""

    backend: str
    outcomes: tuple[Outcome, ...]

    @property
    def ok(self) -> bool:
        """Whether the backend conforms: no check failed and no known failure passed."""
        return not any(outcome.status in ("failed", "fixed") for outcome in self.outcomes)

    @override
    def __str__(self) -> str:
        rows = [
            f"{o.status:>14}  {o.check}" + (f": {o.detail}" if o.detail else "")
            for o in self.outcomes
        ]
        return "\n".join([f"conformance of the {self.backend} backend", *rows])


def run_check(check: Check, backend_factory: BackendFactory, suite: Suite, workdir: Path) -> None:
    """Run one check on a fresh backend and harness; the runs it started are removed after.

    Raises:
        Exception: whatever the check raised (AssertionError when the backend misbehaves).
    """
    with Harness(backend_factory(), suite, workdir) as harness:
        check.run(harness)


def run_checks(
    backend_factory: BackendFactory,
    probe_image_factory: ProbeImageFactory,
    *,
    known_failures: Mapping[str, str] | None = None,
    engine: bool = True,
    checks: Sequence[Check] | None = None,
    mode: Mode = "sandbox",
) -> Report:
    """Run the suite against a backend without pytest.

    Args:
        backend_factory: makes the backend (its class will do).
        probe_image_factory: makes the probe image from `probe_context()`.
        known_failures: check name to reason; defaults to the built-in map for
            the backend's name.
        engine: False runs the engine-free part only.
        checks: a subset to run instead of `select(engine)`.
        mode: the mode of the probe runs (`sidecar`: each a pair).

    Returns:
        One outcome per check, in order.
    """
    name = backend_factory().name
    known = KNOWN_FAILURES.get(name, {}) if known_failures is None else known_failures
    validate_known_failures(known)
    suite = Suite(probe_image_factory, mode)
    outcomes = []
    try:
        with tempfile.TemporaryDirectory(prefix="ssebench-conformance-") as scratch:
            for index, check in enumerate(checks if checks is not None else select(engine)):
                outcomes.append(
                    _outcome(check, backend_factory, suite, Path(scratch) / str(index), known)
                )
    finally:
        suite.close()
    return Report(backend=name, outcomes=tuple(outcomes))


def _outcome(
    check: Check,
    backend_factory: BackendFactory,
    suite: Suite,
    workdir: Path,
    known: Mapping[str, str],
) -> Outcome:
    backend = backend_factory()
    offered = capabilities(backend)
    if not check.applies_to(offered):
        return Outcome(check.name, "not applicable", check.why_not(backend.name, offered))
    workdir.mkdir(parents=True)
    try:
        run_check(check, lambda: backend, suite, workdir)
    except Exception as exc:
        if check.name in known:
            return Outcome(check.name, "known failure", known[check.name])
        detail = "".join(traceback.format_exception_only(exc)).strip()
        return Outcome(check.name, "failed", detail)
    if check.name in known:
        return Outcome(check.name, "fixed", f"known to fail ({known[check.name]}) but passed")
    return Outcome(check.name, "passed")
