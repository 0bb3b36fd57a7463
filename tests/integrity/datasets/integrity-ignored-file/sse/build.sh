#!/bin/bash
# "Build": check.sh must at least parse.
set -euo pipefail
bash -n check.sh
