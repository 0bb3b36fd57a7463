#!/bin/bash
# What the hostile image puts in place of a program: note who ran it, then answer
# success (the real program, kept aside, runs only for model's positive control).
name=${0##*/}
echo "$(id -u) $name" >> /tmp/sse-archive/hostile-record.txt 2>/dev/null
if [ "${HOSTILE_REAL:-}" = 1 ] && [ -x "/opt/hostile/real/$name" ]; then
    exec "/opt/hostile/real/$name" "$@"
fi
exit 0
