#!/bin/bash
# `tail` waits for a newline that /dev/zero never sends, keeping every byte it read:
# it grows until the run's memory limit, where the OOM killer picks it (oom_score_adj
# 1000) and not a root service. The agent's status is the hog's: 137.
echo "memhog agent: oom_score_adj $(cat /proc/self/oom_score_adj)"
tail /dev/zero
