#!/bin/bash
# The dummy agent: looks at the task and changes nothing.
echo "dummy agent: working in $(pwd) as $(id -un); changing nothing"
