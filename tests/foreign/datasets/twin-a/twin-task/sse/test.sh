#!/bin/bash
set -euo pipefail
echo "testing the task of dataset twin-a"
grep -qx fixed NAME
