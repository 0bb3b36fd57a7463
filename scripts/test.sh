#!/usr/bin/env bash
# Set up what is missing, then run every check: ruff, mypy (strict, on src/), and every
# pytest tier that exists. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$SSEBENCH_ROOT/scripts/setup.sh"
ensure_uv
cd "$SSEBENCH_ROOT"
run() { "$UV" run --frozen --all-packages "$@"; }

say "ruff"
run ruff check .
run ruff format --check .
say "mypy --strict"
run mypy packages/*/src
say "pytest"
run pytest "$@"
