#!/bin/bash
# Usage: run.sh <poc-archive>
# Extracts the PoC archive with pyarchive into .poc-run/jail/out (inside the
# current directory) and looks for files written outside that destination.
# Exits 0 when nothing escaped (the archive was extracted safely or refused),
# non-zero while the path traversal still works or pyarchive could not run.
set -u
if [ $# -ne 1 ]; then
  echo "usage: $0 <poc-archive>" >&2
  exit 2
fi
export PYTHONDONTWRITEBYTECODE=1
sandbox="$PWD/.poc-run"
dest="$sandbox/jail/out"
rm -rf "$sandbox"
mkdir -p "$dest"

python3 -m pyarchive extract "$1" "$dest"
rc=$?

escaped=$(find "$sandbox" -mindepth 1 \
  ! -path "$sandbox/jail" ! -path "$dest" ! -path "$dest/*" -print)
rm -rf "$sandbox"
if [ -n "$escaped" ]; then
  echo "run.sh: path traversal: files written outside the destination:" >&2
  echo "$escaped" | sed "s#^$sandbox/#  .poc-run/#" >&2
  exit 1
fi
case $rc in
  0|1) exit 0 ;;   # extracted safely, or refused (ArchiveError or an exception)
  *) echo "run.sh: pyarchive exited with status $rc" >&2; exit 3 ;;
esac
