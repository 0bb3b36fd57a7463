#!/bin/bash
set -euo pipefail
test -f part-0/f-100.txt
