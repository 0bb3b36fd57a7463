#!/usr/bin/env bash
# Set up what is missing, then run every check: ruff, mypy (strict, on src/, images/,
# benchmarks/, plugins/ and the example extension), and every pytest tier that exists.
# Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$SSEBENCH_ROOT/scripts/setup.sh"
ensure_uv
cd "$SSEBENCH_ROOT"
# The unnamed images SSEBench built (its label, any prefix): each rebuild of a layer
# leaves the old image unnamed, and a run of this suite rebuilds many on purpose. On a
# machine that runs it every day they reached 39 GB, the disk ran low mid-run and the
# kubelet began to evict. Unnamed images no build names again; nothing else is touched.
say "removing the unnamed images of earlier SSEBench builds: $(docker image prune --force \
    --filter label=org.ssebench.registry | tail -n 1)"
run() { "$UV" run --frozen --all-packages "$@"; }

# The k8s tier needs the one-node cluster (tests/k8s/cluster/README.md): when any
# selected test is in tests/k8s, start it in the background now, so that a cold
# build (10 minutes and more) overlaps ruff, mypy and the tiers before tests/k8s;
# tests/k8s/conftest.py waits for it. The cluster is always stopped again.
K8S=$SSEBENCH_ROOT/tests/k8s/cluster/cluster.sh
if grep -q '^tests/k8s/' <<<"$(run pytest --collect-only -q "$@" 2>/dev/null || true)"; then
    SSEBENCH_K8S_UP_LOG=$(mktemp /tmp/ssebench-k8s-up.XXXXXX.log)
    # At nice 19 (build.sh): cold, at nice 0 it took half the CPU from the engine's run,
    # which then took 42 minutes instead of 28, and the whole run 52 instead of 43.
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
# Each pytest run is timed, with junit files that scripts/tier_report.py reads for the
# table at the end (each test's tier, start and end: the root conftest.py). Tiers that
# mostly wait (on containers, pods, timeouts, model scripts) run on pytest-xdist workers,
# grouped so that tests sharing a session's work or the engine's state share a worker
# (XDIST_GROUPS). Tiers share runs where their tests can run side by side: unit and
# process (no engine), docker and integrity (the engine's workers stay busy while the
# longest groups, integrity's and the agents' on the gateway, run), and the k8s tier runs
# beside the engine's. Tests marked `alone` run after all that, one at a time, with
# nothing beside them.
TIER_DIR=$(mktemp -d /tmp/ssebench-tiers.XXXXXX)
timed() {
    local name=$1 start rc=0
    shift
    say "pytest: $name"
    start=$EPOCHREALTIME
    "$@" || rc=$?
    awk "BEGIN { print $EPOCHREALTIME - $start }" >"$TIER_DIR/$name.wall"
    return "$rc"
}
# parallel NAME WORKERS MARKERS: a run's tests on pytest-xdist workers, but the `alone` ones.
parallel() {
    local name=$1 workers=$2 markers=$3
    run pytest --junitxml="$TIER_DIR/$name.xml" -n "$workers" --dist loadgroup \
        -m "($markers) and not alone" --ignore=tests/chaos
}
if [ $# != 0 ]; then
    rc=0
    timed selection run pytest --junitxml="$TIER_DIR/selection.xml" "$@" || rc=$?
    run python scripts/tier_report.py "$TIER_DIR"
    exit "$rc"
fi
rc=0
timed local parallel local 2 "not docker and not k8s" || rc=$?
# The k8s tier starts once the cluster is up (waited for here, not in a test's fixture,
# so no test's timeout runs while a cold build ends) and runs beside the engine's: its
# tests mostly wait on pods, and the engine's on containers. Its output is shown after.
k8s_tier() {
    if [ -n "${SSEBENCH_K8S_UP_PID:-}" ]; then
        say "k8s: waiting for the test cluster to be up (log: $SSEBENCH_K8S_UP_LOG)"
        local start=$SECONDS
        # Not this shell's child: wait until it is gone.
        while kill -0 "$SSEBENCH_K8S_UP_PID" 2>/dev/null; do sleep 5; done
        say "k8s: waited $((SECONDS - start)) s for the cluster"
    fi
    timed k8s parallel k8s 3 "k8s"
}
k8s_tier >"$TIER_DIR/k8s.log" 2>&1 &
k8s_pid=$!
# Ctrl-C or TERM stops it too (its pytest first), before the EXIT trap stops the cluster.
stop_k8s_tier() { pkill -TERM -P "$k8s_pid" 2>/dev/null; kill "$k8s_pid" 2>/dev/null; wait "$k8s_pid"; }
trap 'stop_k8s_tier; exit 130' INT
trap 'stop_k8s_tier; exit 143' TERM
timed engine parallel engine 4 "docker and not k8s" || rc=$?
wait "$k8s_pid" || rc=$?
say "pytest: k8s (its output)"
cat "$TIER_DIR/k8s.log"
timed alone run pytest --junitxml="$TIER_DIR/alone.xml" -n 0 -m alone --ignore=tests/chaos || rc=$?
# The chaos tier runs last and alone. Under CI, which owns its engine, with the engine
# restart that stops every container on the engine (tests/chaos/test_chaos.py).
if [ "${CI:-}" = true ]; then
    export SSEBENCH_CHAOS_ENGINE_RESTART=1
fi
timed chaos run pytest --junitxml="$TIER_DIR/chaos.xml" -n 0 tests/chaos || rc=$?
run python scripts/tier_report.py "$TIER_DIR" --expect unit,process,docker,integrity,k8s,chaos \
    || rc=$?
exit "$rc"
