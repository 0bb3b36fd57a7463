#!/bin/bash
set -euo pipefail
echo "building the task of dataset twin-a: $(cat NAME)"
grep -qx "twin a" NAME
