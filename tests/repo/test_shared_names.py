"""The shared names and defaults of `ssebench.spec.contract` are spelled only there.

A module that writes `"result.json"` or `3600` itself drifts the day the contract
changes; this gate finds such a literal in any package's source (docstrings and
messages excepted: only expressions are looked at).
"""

from __future__ import annotations

import ast
from pathlib import Path

from ssebench.spec import contract

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "packages/ssebench-spec/src/ssebench/spec/contract.py"
NAMES = {
    contract.RESULT_FILE,
    contract.SUMMARY_FILE,
    contract.RUN_FILE,
    contract.DIALOG_FILE,
    contract.PLUGIN_RESULTS_FILE,
}
NUMBERS = {contract.DEFAULT_AGENT_TIMEOUT}


def _literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or id(node) in docstrings:
            continue
        if (isinstance(node.value, str) and node.value in NAMES) or (
            type(node.value) is int and node.value in NUMBERS
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return found


def test_no_source_module_spells_a_shared_name_or_default_itself() -> None:
    sources = [
        path
        for path in sorted(ROOT.glob("packages/*/src/**/*.py"))
        + sorted(ROOT.glob("images/**/*.py"))
        if path != CONTRACT
    ]
    assert sources
    found = [hit for path in sources for hit in _literals(path)]
    assert not found, "use ssebench.spec.contract's names instead of:\n" + "\n".join(found)
