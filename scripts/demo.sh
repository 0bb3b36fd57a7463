#!/usr/bin/env bash
# Quick start: set up what is missing, then run SSEBench's main job: the reference agent
# and the dummy agent on a demo task, each graded in a real container.
# Usage: scripts/demo.sh [TASK]   (default: pyarchive-path-traversal; see `ssebench tasks list`)
#        scripts/demo.sh --agent mini-swe-agent [TASK]
#          a real agent (from PyPI) solving TASK through the model gateway, its model the
#          scripted one replaying scripts/model-scripts/<agent>/<TASK>.fix.json on port 8808
#          (models.yaml's `scripted`); then the same agent with a model that never fixes.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

agent=""
if [ "${1:-}" = --agent ]; then
    agent="${2:?--agent needs a name}"
    shift 2
fi
"$SSEBENCH_ROOT/scripts/setup.sh"
ensure_uv
cd "$SSEBENCH_ROOT"
task="${1:-pyarchive-path-traversal}"
note() { printf "demo: %s\n" "$*" >&2; }
ssebench() { "$UV" run --frozen --all-packages ssebench "$@"; }

if [ -z "$agent" ]; then
    note "the reference agent on $task (applies the known fix: every check must pass)"
    ssebench run --task "$task" --agent reference --require-pass
    note "the dummy agent on $task (changes nothing: the PoCs still trigger)"
    ssebench run --task "$task" --agent dummy
    note "both runs are recorded under results/$task/none/"
    exit 0
fi

scripts="$SSEBENCH_ROOT/scripts/model-scripts/$agent"
[ -f "$scripts/$task.fix.json" ] || { note "no model script $scripts/$task.fix.json"; exit 1; }
served=""
serve() {
    if (exec 3<>/dev/tcp/127.0.0.1/8808) 2>/dev/null; then
        note "port 8808 is taken: models.yaml's scripted model is served there"; return 1
    fi
    # A process group of its own (setsid): uv runs the server as its child, and the
    # whole group is ended by its ID, so no server outlives its part of the demo.
    setsid "$UV" run --frozen --all-packages ssebench models serve-script "$1" \
        --host 0.0.0.0 --port 8808 >&2 &
    served=$!
    for _ in $(seq 300); do
        if (exec 3<>/dev/tcp/127.0.0.1/8808) 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    note "the scripted model did not start"; return 1
}
unserve() {
    if [ -n "$served" ]; then
        kill -- "-$served" 2>/dev/null || true
        wait "$served" 2>/dev/null || true
        for _ in $(seq 100); do
            (exec 3<>/dev/tcp/127.0.0.1/8808) 2>/dev/null || break
            sleep 0.1
        done
    fi
    served=""
}
trap unserve EXIT

note "$agent on $task through the model gateway, its model replaying $task.fix.json"
serve "$scripts/$task.fix.json"
ssebench run --task "$task" --agent "$agent" --model scripted --require-pass
unserve
note "$agent on $task with a model that never fixes anything (fails like dummy)"
serve "$scripts/never-fixes.json"
ssebench run --task "$task" --agent "$agent" --model scripted || true
note "both runs are recorded under results/$task/scripted/$agent/"
