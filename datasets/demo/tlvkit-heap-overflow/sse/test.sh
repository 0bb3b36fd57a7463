#!/bin/bash
# Build and run tlvkit's tests (with AddressSanitizer) in the current directory.
set -euo pipefail
export ASAN_OPTIONS=detect_leaks=0
make -s clean
make -s check \
  CFLAGS="-O1 -g -Wall -Wextra -fno-omit-frame-pointer -fsanitize=address" \
  LDFLAGS="-fsanitize=address"
