"""The entrypoint (PID 1, resident through the agent phase) loads only the standard
library and SSEBench's own stdlib-only modules: no msgspec, no PyYAML, nothing else.

`ssebench.spec` loads its names lazily (PEP 562), so `ssebench.spec.contract`
is plain constants; before that, the entrypoint executed contract.py on its own
to avoid `ssebench.spec`'s eager imports. Each check runs in a fresh interpreter,
as the entrypoint starts.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.process  # every test here starts a real process

_PROBE = (
    "import sys\n"
    "before = set(sys.modules)\n"
    "import {module}\n"
    "print('\\n'.join(sorted(set(sys.modules) - before)))\n"
)


def _loaded_by(module: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _PROBE.format(module=module)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return proc.stdout.split()


@pytest.mark.parametrize(
    "module", ["ssebench.daemon.entrypoint", "ssebench.spec.contract", "ssebench.spec.atomic"]
)
def test_importing_loads_only_the_standard_library_and_ssebench(module: str) -> None:
    loaded = _loaded_by(module)
    assert module in loaded
    foreign = [
        name
        for name in loaded
        if name.split(".")[0] not in sys.stdlib_module_names and name.split(".")[0] != "ssebench"
    ]
    assert foreign == []
    assert "msgspec" not in loaded and "yaml" not in loaded


def test_the_entrypoint_reads_the_contract_through_the_normal_import() -> None:
    loaded = _loaded_by("ssebench.daemon.entrypoint")
    assert "ssebench.spec.contract" in loaded
    # Nothing that needs msgspec: the spec's Structs, the daemon's wire messages.
    assert not [name for name in loaded if name.startswith("ssebench.spec._")]
    assert "ssebench.daemon._messages" not in loaded
