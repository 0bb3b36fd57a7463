#!/usr/bin/env bash
# Quick start: set up what is missing, then run SSEBench's main job.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$SSEBENCH_ROOT/scripts/setup.sh"
say "SSEBench is set up. Running agents on tasks ('ssebench run') is not built yet;"
say "this script will run the reference and dummy agents on a demo task once it is."
