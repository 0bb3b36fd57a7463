#!/bin/bash
# Usage: run.sh <poc>; exits 0 once check.sh no longer crashes on it.
bash check.sh "$1"
rc=$?
[ "$rc" -le 1 ] || { echo "run.sh: check.sh crashed (status $rc)" >&2; exit 1; }
