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

The tool layer's contract (docs/architecture.md) is a second suite, for any tool layer
(the `ssebench.tool_layers` entry points): `TOOL_LAYER_CHECKS`, run with
`run_tool_layer_checks(docker_subject(image, task_config))` or, with pytest,
`test_tool_layer = tool_layer_tests()` and a `tool_layer_subject` fixture.
`ssebench tool-layers check NAME` builds a layer and runs them.
"""

from ssebench.conformance._check import CAPABILITIES, Capability, Check, capabilities
from ssebench.conformance._harness import (
    BackendFactory,
    Harness,
    ProbeImageFactory,
    Suite,
    probe_context,
)
from ssebench.conformance._pytest import conformance_tests, tool_layer_tests
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
from ssebench.conformance._tool_layer import (
    CommandRunner,
    Ran,
    ToolLayerCheck,
    ToolLayerReport,
    ToolLayerSubject,
    docker_subject,
    run_in_image,
    run_tool_layer_checks,
)
from ssebench.conformance._tool_layer_checks import TOOL_LAYER_CHECKS

__all__ = [
    "CAPABILITIES",
    "CHECKS",
    "KNOWN_FAILURES",
    "TOOL_LAYER_CHECKS",
    "BackendFactory",
    "Capability",
    "Check",
    "CommandRunner",
    "Harness",
    "Outcome",
    "ProbeImageFactory",
    "Ran",
    "Report",
    "Status",
    "Suite",
    "ToolLayerCheck",
    "ToolLayerReport",
    "ToolLayerSubject",
    "capabilities",
    "conformance_tests",
    "docker_subject",
    "probe_context",
    "run_check",
    "run_checks",
    "run_in_image",
    "run_tool_layer_checks",
    "select",
    "tool_layer_tests",
]
