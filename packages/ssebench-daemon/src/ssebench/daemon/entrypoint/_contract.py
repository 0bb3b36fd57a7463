"""The container contract's constants, without `ssebench.spec`'s package import.

`ssebench.spec/__init__.py` loads msgspec, PyYAML and every spec type (about
14 MB of memory) while the entrypoint needs only the names in
`ssebench.spec.contract`, a module of plain constants. During the agent
phase the entrypoint is one of three resident SSEBench processes with a
shared memory budget, so it executes that one file on its own; type
checkers see the normal import. Whatever else the entrypoint needs from
`ssebench.spec` it imports late, once the agent has finished.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

_NAME: Final = "ssebench.spec.contract"


def _load() -> ModuleType:
    loaded = sys.modules.get(_NAME)
    if loaded is not None:
        return loaded
    import ssebench  # the PEP 420 namespace: importing it runs nothing

    for entry in ssebench.__path__:
        path = Path(entry, "spec", "contract.py")
        spec = importlib.util.spec_from_file_location("_ssebench_entrypoint_contract", path)
        if spec is None or spec.loader is None or not path.is_file():
            continue
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    from ssebench.spec import contract as imported  # an unusual install: the normal way

    return imported


if TYPE_CHECKING:
    from ssebench.spec import contract
else:
    contract = _load()

__all__ = ["contract"]
