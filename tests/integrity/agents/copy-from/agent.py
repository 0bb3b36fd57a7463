"""Hole 7 of issue 13: prints what its image kept of the reference patch."""

from pathlib import Path

import ssehostile as h

leak = Path("/opt/agent/leak")
kept = leak.read_text(errors="replace") if leak.is_file() else ""
print(f"layer-leak: the image kept {len(kept)} bytes of /ssebench/diffs/patch.diff")
print(kept)
h.write_report({"kept": kept})
