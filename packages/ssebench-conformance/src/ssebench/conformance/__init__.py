"""SSEBench's backend conformance suite: what every backend must do, checked the same way.

A backend package runs it with two factories: one that makes the backend, one
that makes the probe image (from `probe_context()`, shipped here) under a name
the backend can run.

With pytest, in a test module:

    @pytest.fixture
    def conformance_backend_factory() -> BackendFactory:
        return MyBackend

    @pytest.fixture
    def conformance_probe_image_factory() -> ProbeImageFactory:
        return build_and_push_the_probe_image

    test_conformance = conformance_tests()

Without pytest: `run_checks(MyBackend, build_and_push_the_probe_image)` returns
a `Report`. `KNOWN_FAILURES` holds, per built-in backend, the checks it is known
to fail (strict expected failures). `ssebench.conformance.fake` has the shared
fake backend, which passes the engine-free part (`engine=False`).
"""

from ssebench.conformance._check import CAPABILITIES, Capability, Check, capabilities
from ssebench.conformance._harness import (
    BackendFactory,
    Harness,
    ProbeImageFactory,
    Suite,
    probe_context,
)
from ssebench.conformance._pytest import conformance_tests
from ssebench.conformance._suite import (
    CHECKS,
    KNOWN_FAILURES,
    Outcome,
    Report,
    Status,
    run_check,
    run_checks,
    select,
)

__all__ = [
    "CAPABILITIES",
    "CHECKS",
    "KNOWN_FAILURES",
    "BackendFactory",
    "Capability",
    "Check",
    "Harness",
    "Outcome",
    "ProbeImageFactory",
    "Report",
    "Status",
    "Suite",
    "capabilities",
    "conformance_tests",
    "probe_context",
    "run_check",
    "run_checks",
    "select",
]
