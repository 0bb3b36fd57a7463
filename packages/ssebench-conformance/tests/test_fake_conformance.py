"""The shared fake backend passes the engine-free part of the conformance suite."""

from __future__ import annotations

import pytest

from ssebench.conformance import BackendFactory, ProbeImageFactory, conformance_tests
from ssebench.conformance.fake import FakeBackend, fake_probe_image


@pytest.fixture
def conformance_backend_factory() -> BackendFactory:
    return FakeBackend


@pytest.fixture
def conformance_probe_image_factory() -> ProbeImageFactory:
    return fake_probe_image


test_conformance = conformance_tests(engine=False, backend=FakeBackend)
