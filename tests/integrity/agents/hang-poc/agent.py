"""Hole 3 of issue 13 (a hanging PoC): a patch that makes pyarchive's command line hang the
first time it extracts into the run script's sandbox (`.poc-run/`), i.e. in the first PoC
run and nowhere else. An honest patch can do that; the grade must be `failed` with a
reason."""

from __future__ import annotations

from pathlib import Path

import ssehostile as h

HANG = """
def main(argv: list[str] | None = None) -> int:
    import os
    import time

    args = sys.argv if argv is None else argv
    if any("/.poc-run/" in arg for arg in args) and not os.path.exists(".hung-once"):
        open(".hung-once", "w").close()  # in the build's copy: later PoC runs go on
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
    print("hang-poc: the first PoC run now hangs")


if __name__ == "__main__":
    main()
