#!/bin/bash
# Build tlvkit in the current directory with AddressSanitizer.
# The flags are given on the make command line so they override the Makefile.
set -euo pipefail
export ASAN_OPTIONS=detect_leaks=0
make -s clean
make -s all \
  CFLAGS="-O1 -g -Wall -Wextra -fno-omit-frame-pointer -fsanitize=address" \
  LDFLAGS="-fsanitize=address"
