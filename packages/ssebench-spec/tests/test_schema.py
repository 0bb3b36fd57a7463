from __future__ import annotations

from pathlib import Path

from ssebench.spec import find_home
from ssebench.spec.schema import main, public_structs, render_schemas


def test_the_checked_in_schemas_match_the_code() -> None:
    checked_in = find_home() / "schemas"
    on_disk = {path.name: path.read_bytes() for path in checked_in.glob("*.json")}
    assert on_disk == render_schemas(), (
        "schemas/ is out of date: run `uv run python -m ssebench.spec.schema --out schemas/`"
    )


def test_the_schema_command_writes_one_file_per_struct_and_drops_stale_ones(tmp_path: Path) -> None:
    (tmp_path / "Gone.json").write_text("{}")
    assert main(["--out", str(tmp_path)]) == 0
    assert sorted(path.stem for path in tmp_path.glob("*.json")) == sorted(public_structs())
