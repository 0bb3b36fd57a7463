#!/bin/bash
set -u
for good in tests/good*.txt; do bash check.sh "$good" || exit 1; done
