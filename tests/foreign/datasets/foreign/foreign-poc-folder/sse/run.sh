#!/bin/bash
# Usage: run.sh <poc>; the PoC's folder holds expect.env, which says what a fixed
# check.sh answers. Exits 0 once check.sh no longer crashes on the PoC.
set -u
source "$(dirname "$1")/expect.env" || { echo "run.sh: no expect.env beside the PoC" >&2; exit 1; }
bash check.sh "$1"
rc=$?
[ "$rc" -eq "$EXPECTED_STATUS" ] || { echo "run.sh: check.sh said $rc, not $EXPECTED_STATUS" >&2; exit 1; }
