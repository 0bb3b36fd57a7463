#!/bin/bash
# Makes pyarchive's build sleep for a minute (the build imports the package): grading
# (which builds the agent's patch) then lasts long enough for a test to stop the run in
# the middle of it. Not through a Makefile: the demo tasks protect theirs, and changes
# there are in no check.
set -e
printf '\nimport time as _slow\n\n_slow.sleep(60)\n' >> pyarchive/__init__.py
echo "slow grader: the build now takes a minute"
