#!/bin/bash
# "Build" pyarchive in the current directory: byte-compile every module in
# memory (no .pyc files are written) and import the package.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
python3 - <<'PY'
import pathlib
import sys

for path in sorted(pathlib.Path("pyarchive").rglob("*.py")):
    compile(path.read_bytes(), str(path), "exec")
sys.path.insert(0, ".")
import pyarchive  # noqa: E402,F401
import pyarchive.__main__  # noqa: E402,F401
print("pyarchive", pyarchive.__version__, "ok")
PY
