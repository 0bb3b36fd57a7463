#!/bin/bash
set -euo pipefail
echo "building the task of dataset twin-b: $(cat NAME)"
grep -qx "twin b" NAME
