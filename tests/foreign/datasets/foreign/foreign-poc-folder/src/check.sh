#!/bin/bash
# Usage: check.sh FILE — accepts a file of words, one a line; rejects (status 1) one
# that holds the word BAD.
set -u
while IFS= read -r word; do
  case $word in
    BAD) exit 3 ;;  # the bug: a crash, where a rejection (status 1) was meant
  esac
done < "$1"
exit 0
