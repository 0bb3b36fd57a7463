"""The probe image on the fake platform: probe.sh's engine-free modes, played in a thread."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from ssebench.conformance._fake import FakeContainer, FakeImage
from ssebench.spec import contract

FAKE_PROBE_IMAGE: Final = "fake/probe:conformance"
"""The probe image's name on the fake platform."""


def probe(container: FakeContainer) -> int:
    """What probe.sh does in its talk, sleep and keep modes; the others need a real engine."""
    mode = container.env.get("PROBE_MODE", "talk")
    results = container.env.get(contract.ENV_RESULTS, contract.RESULTS_DIR)
    archive = container.env.get(contract.ENV_ARCHIVE, contract.ARCHIVE_DIR)
    if mode == "talk":
        container.say("probe: line one")
        container.complain("probe: to stderr")
        container.write(f"{results}/{contract.RESULT_FILE}", b'{"probe": true}\n')
        container.write(f"{archive}/{contract.DIALOG_FILE}", b"from the agent\n")
        container.say("probe: line two")
        return int(container.env.get("PROBE_EXIT") or "0")
    if mode in ("sleep", "keep"):
        if mode == "keep":
            container.write(f"{results}/{contract.RESULT_FILE}", b'{"probe": "kept"}\n')
            container.write(f"{results}/{contract.GRADED_MARKER}", b"")
            container.say("probe: graded, staying up")
        else:
            container.say("probe: sleeping")
        container.wait_for_stop()
        container.say("probe: stopped")
        return 143
    container.complain(f"probe: mode {mode} needs a real engine")
    return 2


def probe_images() -> dict[str, FakeImage]:
    """The fake platform's images at the start: the probe image."""
    files = {"/probe/artifact.txt": b"copied out of the image\n"}
    return {FAKE_PROBE_IMAGE: FakeImage(files=files, program=probe)}


def fake_probe_image(context: Path) -> str:
    """The probe-image factory for the fake backend: its probe image is already there."""
    return FAKE_PROBE_IMAGE
