#!/usr/bin/env bash
# Quick start: set up what is missing, then run SSEBench's main job: the reference agent
# and the dummy agent on a demo task, each graded in a real container.
# Usage: scripts/demo.sh [TASK]   (default: pyarchive-path-traversal; see `ssebench tasks list`)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$SSEBENCH_ROOT/scripts/setup.sh"
ensure_uv
cd "$SSEBENCH_ROOT"
task="${1:-pyarchive-path-traversal}"
note() { printf "demo: %s\n" "$*" >&2; }
ssebench() { "$UV" run --frozen --all-packages ssebench "$@"; }

note "the reference agent on $task (applies the known fix: every check must pass)"
ssebench run --task "$task" --agent reference --require-pass
note "the dummy agent on $task (changes nothing: the PoCs still trigger)"
ssebench run --task "$task" --agent dummy
note "both runs are recorded under results/$task/none/"
