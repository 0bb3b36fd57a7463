"""JSON Schemas of every public Struct.

    python -m ssebench.spec.schema --out schemas/

writes one `<Name>.json` per Struct; the checked-in copies are tested for drift.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

import ssebench.spec as spec


def public_structs() -> dict[str, type[msgspec.Struct]]:
    """Every Struct `ssebench.spec` exports, by name, excluding the two bases."""
    found: dict[str, type[msgspec.Struct]] = {}
    for name in spec.__all__:
        value = getattr(spec, name)
        if (
            isinstance(value, type)
            and issubclass(value, msgspec.Struct)
            and value not in (spec.Message, spec.UserInput)
        ):
            found[name] = value
    return found


def render_schemas() -> dict[str, bytes]:
    """File name to content, for every public Struct."""
    return {
        f"{name}.json": msgspec.json.format(
            msgspec.json.encode(msgspec.json.schema(struct)), indent=2
        )
        + b"\n"
        for name, struct in sorted(public_structs().items())
    }


def write_schemas(out: Path) -> list[Path]:
    """Write every schema into `out` (created if needed), removing stale ones.

    Returns:
        The files written.
    """
    out.mkdir(parents=True, exist_ok=True)
    rendered = render_schemas()
    for stale in out.glob("*.json"):
        if stale.name not in rendered:
            stale.unlink()
    written = []
    for name, content in rendered.items():
        path = out / name
        path.write_bytes(content)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: write the schemas into `--out`."""
    parser = argparse.ArgumentParser(prog="python -m ssebench.spec.schema", description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="folder to write the schemas to")
    args = parser.parse_args(argv)
    written = write_schemas(args.out)
    print(f"wrote {len(written)} schemas to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
