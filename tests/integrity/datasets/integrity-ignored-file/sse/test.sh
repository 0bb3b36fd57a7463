#!/bin/bash
# The project's tests: every tests/*.txt is a good file, except bad-*.txt files.
set -u
for good in tests/good*.txt; do bash check.sh "$good" || exit 1; done
for bad in tests/bad*.txt; do
  [ -e "$bad" ] || continue
  bash check.sh "$bad"; [ $? -eq 1 ] || exit 1
done
