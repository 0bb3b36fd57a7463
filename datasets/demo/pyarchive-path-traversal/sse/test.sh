#!/bin/bash
# Run pyarchive's tests in the current directory with Debian's pytest.
# Nothing is written outside the current directory: no .pyc files, no pytest
# cache, and pytest's temporary directories live in .pytest-tmp.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
export HOME="$PWD"
rm -rf .pytest-tmp
status=0
python3 -m pytest -q -p no:cacheprovider --basetemp="$PWD/.pytest-tmp" tests || status=$?
rm -rf .pytest-tmp
exit $status
