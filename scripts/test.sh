#!/usr/bin/env bash
# Set up what is missing, then run every check: ruff, mypy (strict, on src/, images/,
# benchmarks/, plugins/ and the example extension), and every pytest tier that exists.
# Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$SSEBENCH_ROOT/scripts/setup.sh"
ensure_uv
cd "$SSEBENCH_ROOT"
run() { "$UV" run --frozen --all-packages "$@"; }

# The k8s tier needs the one-node cluster (tests/k8s/cluster/README.md): when any
# selected test is in tests/k8s, start it in the background now, so that a cold
# build (10 minutes and more) overlaps ruff, mypy and the tiers before tests/k8s;
# tests/k8s/conftest.py waits for it. The cluster is always stopped again.
K8S=$SSEBENCH_ROOT/tests/k8s/cluster/cluster.sh
if grep -q '^tests/k8s/' <<<"$(run pytest --collect-only -q "$@" 2>/dev/null || true)"; then
    SSEBENCH_K8S_UP_LOG=$(mktemp /tmp/ssebench-k8s-up.XXXXXX.log)
    say "k8s: starting the test cluster in the background (log: $SSEBENCH_K8S_UP_LOG)"
    "$K8S" up >"$SSEBENCH_K8S_UP_LOG" 2>&1 &
    SSEBENCH_K8S_UP_PID=$!
    export SSEBENCH_K8S_UP_PID SSEBENCH_K8S_UP_LOG
    # An early failure waits for the start to end (Ctrl-C reaches it too) before `down`.
    trap 'rc=$?; wait "$SSEBENCH_K8S_UP_PID" || true; "$K8S" down || { say "cluster.sh down failed"; [ "$rc" != 0 ] || rc=1; }; exit "$rc"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
fi

say "ruff"
run ruff check .
run ruff format --check .
say "mypy --strict"
# images/ (tool/setup.py runs as root at build time) and benchmarks/ too.
run mypy packages/*/src images benchmarks plugins tests/fixtures/ssebench-example-ext/src
say "pytest"
if [ "${CI:-}" = true ] && [ $# = 0 ]; then
    # CI owns its engine: the chaos tier runs last and alone, with the engine restart
    # that stops every container on the engine (tests/chaos/test_chaos.py).
    rc=0
    # --durations: where the minutes go, in the CI log.
    run pytest --ignore=tests/chaos --durations=40 || rc=$?
    say "pytest: the chaos tier, with an engine restart"
    SSEBENCH_CHAOS_ENGINE_RESTART=1 run pytest tests/chaos || rc=$?
    exit "$rc"
else
    run pytest "$@"
fi
