#!/bin/bash
# Makes `make all` sleep for a minute: grading (which builds the agent's patch) then
# lasts long enough for a test to stop the run in the middle of it.
set -e
printf '\n.PHONY: slow-grading\nall: slow-grading\nslow-grading:\n\t@sleep 60\n' >> Makefile
echo "slow grader: the build now takes a minute"
