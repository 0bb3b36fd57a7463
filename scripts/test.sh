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
# The k8s tier needs the one-node cluster (tests/k8s/cluster/README.md): start it
# when any selected test is in tests/k8s, and always stop it again.
K8S=$SSEBENCH_ROOT/tests/k8s/cluster/cluster.sh
if grep -q '^tests/k8s/' <<<"$(run pytest --collect-only -q "$@" 2>/dev/null || true)"; then
    trap 'rc=$?; "$K8S" down || { say "cluster.sh down failed"; [ "$rc" != 0 ] || rc=1; }; exit "$rc"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    "$K8S" up >/dev/null || say "the k8s cluster did not start; the k8s tier will fail"
fi
run pytest "$@"
