#!/bin/bash
set -euo pipefail
bash -n check.sh
