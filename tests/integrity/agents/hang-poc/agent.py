"""Hole 3 of issue 13 (a hanging PoC): a patch that makes pyarchive's command line hang
when it extracts into the run script's sandbox (`.poc-run/`), i.e. in every PoC run and
nowhere else. An honest patch can do that; the grade must be `failed` with a reason."""

from __future__ import annotations

from pathlib import Path

import ssehostile as h

HANG = """
def main(argv: list[str] | None = None) -> int:
    import time

    if any("/.poc-run/" in arg for arg in (sys.argv if argv is None else argv)):
        time.sleep(100000)
    return _main(argv)
"""


def main() -> None:
    entry = Path("pyarchive/__main__.py")
    source = entry.read_text()
    assert "def main(argv" in source and 'if __name__ == "__main__":' in source
    source = source.replace("def main(argv", "def _main(argv", 1)
    source = source.replace('if __name__ == "__main__":', HANG + '\n\nif __name__ == "__main__":')
    entry.write_text(source)
    h.write_report({"patched": str(entry)})
    print("hang-poc: every PoC run now hangs")


if __name__ == "__main__":
    main()
