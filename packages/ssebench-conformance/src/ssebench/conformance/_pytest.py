"""The suite as pytest tests: one test per check, the factories given by two fixtures."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ssebench.conformance._check import Check, capabilities
from ssebench.conformance._harness import BackendFactory, ProbeImageFactory, Suite
from ssebench.conformance._suite import (
    KNOWN_FAILURES,
    run_check,
    select,
    validate_known_failures,
)
from ssebench.conformance._tool_layer import ToolLayerCheck, ToolLayerSubject
from ssebench.spec import Backend, Mode


def conformance_tests(
    *,
    known_failures: Mapping[str, str] | None = None,
    engine: bool = True,
    backend: type[Backend[Any]] | None = None,
    modes: Sequence[Mode] = ("sandbox",),
) -> Callable[..., None]:
    """A pytest test function that runs each check of the suite as a test of its own.

    Assign it to a `test_` name in a test module; the module or a conftest
    provides the two factories as fixtures:

        @pytest.fixture
        def conformance_backend_factory() -> BackendFactory: ...
        @pytest.fixture
        def conformance_probe_image_factory() -> ProbeImageFactory: ...

        test_conformance = conformance_tests()

    A check that does not apply to the backend (an ability it does not offer)
    is skipped with the reason, or, when `backend` names the class, never
    collected; a known failure is a strict expected failure.

    Args:
        known_failures: check name to reason; by default the built-in map for
            the backend's name (`KNOWN_FAILURES`).
        engine: False runs the engine-free part only (what the fake backend passes).
        backend: the backend's class, when known: only the checks that apply to
            what it offers become tests (the factory must make one of its kind).
        modes: the modes of the probe runs; each check runs once per mode (a backend
            that carries out sidecar pairs passes `("sandbox", "sidecar")`).

    Raises:
        ValueError: `known_failures` names a check the suite does not have.
    """
    if known_failures is not None:
        validate_known_failures(known_failures)
    # Shared by the tests of this suite: the probe image, made once; the egress servers.
    suites: dict[Mode, Suite] = {}

    def suite_for(request: pytest.FixtureRequest, factory: ProbeImageFactory, mode: Mode) -> Suite:
        if mode not in suites:
            suites[mode] = Suite(factory, mode)
            request.config.add_cleanup(suites[mode].close)
        return suites[mode]

    declared = capabilities(backend) if backend is not None else None
    checks = [check for check in select(engine) if declared is None or check.applies_to(declared)]

    @pytest.mark.parametrize("conformance_mode", list(modes))
    @pytest.mark.parametrize(
        "conformance_check", [pytest.param(check, id=check.name) for check in checks]
    )
    def test_conformance(
        conformance_check: Check,
        conformance_mode: Mode,
        conformance_backend_factory: BackendFactory,
        conformance_probe_image_factory: ProbeImageFactory,
        request: pytest.FixtureRequest,
        tmp_path: Path,
    ) -> None:
        made = conformance_backend_factory()
        offered = capabilities(made)
        if declared is not None and offered != declared:
            pytest.fail(
                f"the factory made a {type(made).__name__}, which offers "
                f"{sorted(offered)}; conformance_tests(backend=...) named one offering "
                f"{sorted(declared)}"
            )
        if not conformance_check.applies_to(offered):
            pytest.skip(conformance_check.why_not(made.name, offered))
        known = KNOWN_FAILURES.get(made.name, {}) if known_failures is None else known_failures
        validate_known_failures(known)
        if conformance_check.name in known:
            request.applymarker(
                pytest.mark.xfail(reason=known[conformance_check.name], strict=True)
            )
        suite = suite_for(request, conformance_probe_image_factory, conformance_mode)
        run_check(conformance_check, lambda: made, suite, tmp_path)

    return test_conformance


def tool_layer_tests() -> Callable[..., None]:
    """A pytest test function that runs each check of the tool layer's contract as a test.

    Assign it to a `test_` name in a test module; the module or a conftest
    provides the subject (one tool layer built for one task) as a fixture,
    parametrize it to check several tasks or layers:

        @pytest.fixture(scope="module")
        def tool_layer_subject() -> ToolLayerSubject:
            return docker_subject(my_layers_image, task_config)

        test_tool_layer = tool_layer_tests()
    """
    from ssebench.conformance._tool_layer_checks import TOOL_LAYER_CHECKS

    @pytest.mark.parametrize(
        "tool_layer_check",
        [pytest.param(check, id=check.__name__) for check in TOOL_LAYER_CHECKS],
    )
    def test_tool_layer(
        tool_layer_check: ToolLayerCheck, tool_layer_subject: ToolLayerSubject
    ) -> None:
        tool_layer_check(tool_layer_subject)

    return test_tool_layer
