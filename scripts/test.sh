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
# Each tier is a pytest run of its own (its markers in the root conftest.py's tier_of),
# timed, with a junit file that scripts/tier_report.py reads for the table at the end.
TIER_DIR=$(mktemp -d /tmp/ssebench-tiers.XXXXXX)
tier() {
    local name=$1 start rc=0
    shift
    say "pytest: the $name tier"
    start=$EPOCHREALTIME
    run pytest --junitxml="$TIER_DIR/$name.xml" "$@" || rc=$?
    awk "BEGIN { print $EPOCHREALTIME - $start }" >"$TIER_DIR/$name.wall"
    return "$rc"
}
if [ $# != 0 ]; then
    tier selection "$@" || rc=$?
    run python scripts/tier_report.py "$TIER_DIR"
    exit "${rc:-0}"
fi
rc=0
tier unit -m "not docker and not k8s and not process" --ignore=tests/chaos || rc=$?
tier process -m "process and not docker and not k8s" --ignore=tests/chaos || rc=$?
tier docker -m "docker and not integrity and not k8s" --ignore=tests/chaos || rc=$?
tier integrity -m "integrity and not k8s" --ignore=tests/chaos || rc=$?
tier k8s -m k8s --ignore=tests/chaos || rc=$?
# The chaos tier runs last and alone. Under CI, which owns its engine, with the engine
# restart that stops every container on the engine (tests/chaos/test_chaos.py).
if [ "${CI:-}" = true ]; then
    SSEBENCH_CHAOS_ENGINE_RESTART=1 tier chaos tests/chaos || rc=$?
else
    tier chaos tests/chaos || rc=$?
fi
run python scripts/tier_report.py "$TIER_DIR" --expect unit,process,docker,integrity,k8s,chaos \
    || rc=$?
exit "$rc"
