#!/bin/bash
# The reference agent: applies the task's reference fix and commits it.
set -euo pipefail
patch=/reference/patch.diff
if [ ! -r "$patch" ]; then
    echo "reference agent: $patch is missing; only a reference run gets it" >&2
    exit 2
fi
git apply --verbose "$patch"
git add -A
git -c user.name="SSEBench reference agent" -c user.email=reference@ssebench.invalid \
    commit --quiet -m "Apply the reference fix"
echo "reference agent: applied and committed $patch"
