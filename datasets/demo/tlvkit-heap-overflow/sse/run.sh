#!/bin/bash
# Usage: run.sh <poc-file>
# Runs tlvdump (built by build.sh in the current directory) on one PoC input.
# Exits 0 when the input is handled (valid, or rejected as malformed), non-zero
# while it still triggers the bug (an AddressSanitizer report or a crash).
set -u
if [ $# -ne 1 ]; then
  echo "usage: $0 <poc-file>" >&2
  exit 2
fi
if [ ! -x ./tlvdump ]; then
  echo "run.sh: ./tlvdump is missing; run build.sh first" >&2
  exit 2
fi
export ASAN_OPTIONS=detect_leaks=0:exitcode=86
./tlvdump "$1" >/dev/null
rc=$?
case $rc in
  0|1) exit 0 ;;   # valid input, or rejected as malformed: the bug did not trigger
  86) echo "run.sh: AddressSanitizer reported an error" >&2; exit 1 ;;
  *) echo "run.sh: tlvdump exited with status $rc" >&2; exit 1 ;;
esac
