"""The shared fake backend, for tests of what drives a backend (the runner, `ssebench runs`).

    from ssebench.conformance.fake import FakeBackend, FakeImage

It passes the engine-free part of the conformance suite (`fake_probe_image` is
its probe-image factory).
"""

from ssebench.conformance._fake import (
    SKIP,
    Call,
    FakeBackend,
    FakeContainer,
    FakeImage,
    Hook,
    Program,
    exits,
)
from ssebench.conformance._fake_probe import FAKE_PROBE_IMAGE, fake_probe_image

__all__ = [
    "FAKE_PROBE_IMAGE",
    "SKIP",
    "Call",
    "FakeBackend",
    "FakeContainer",
    "FakeImage",
    "Hook",
    "Program",
    "exits",
    "fake_probe_image",
]
