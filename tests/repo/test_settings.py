"""Every `SSEBENCH_*` setting has one row in `ssebench.spec.settings` and one in the README."""

from __future__ import annotations

import re
from pathlib import Path

from ssebench.spec import settings

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bSSEBENCH_[A-Z][A-Z0-9_]*")


def _readme_rows() -> dict[str, str]:
    rows: dict[str, str] = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        found = re.match(r"\| `(SSEBENCH_[A-Z0-9_]+)` \|", line)
        if found:
            rows[found.group(1)] = line
    return rows


def test_the_readme_has_a_row_for_every_setting_with_its_default() -> None:
    rows = _readme_rows()
    missing = [s.name for s in settings.SETTINGS if s.name not in rows]
    assert not missing, f"README.md's settings table lacks {missing}"
    for setting in settings.SETTINGS:
        if " " not in setting.default and setting.default:
            assert f"`{setting.default}`" in rows[setting.name], setting.name
        assert f"`{setting.read_by}`" in rows[setting.name], setting.name


def test_the_readme_documents_no_setting_the_table_lacks() -> None:
    assert set(_readme_rows()) == {s.name for s in settings.SETTINGS}


def test_every_setting_the_packages_name_is_in_the_table() -> None:
    named = {
        name
        for path in ROOT.glob("packages/*/src/**/*")
        if path.suffix in {".py", ".sh", ""} and path.is_file()
        for name in NAME.findall(path.read_text(errors="replace"))
    }
    assert named, "the scan found no setting at all: it is not looking at the sources"
    assert named <= {s.name for s in settings.SETTINGS}, named - {s.name for s in settings.SETTINGS}


def test_each_setting_is_named_once_and_read_by_a_workspace_package() -> None:
    names = [s.name for s in settings.SETTINGS]
    assert len(names) == len(set(names))
    packages = {p.name for p in (ROOT / "packages").iterdir()}
    assert {s.read_by for s in settings.SETTINGS} <= packages
