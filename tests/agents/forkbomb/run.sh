#!/bin/bash
# A fork bomb whose processes stay (each waits for its two children), bounded only by
# the run's --pids-limit, in a session of its own so that killing the agent's process
# group misses it; the entrypoint kills what is left of it (every process of the agent's
# user) when the agent exits.
# Prints its oom_score_adj (tests check it is 1000) and, with shell builtins only (no
# fork is possible by then), how many processes the run holds once the bomb is at its
# limit. Its timers are started before the bomb, which leaves no room for them.
echo "forkbomb agent: oom_score_adj $(cat /proc/self/oom_score_adj)"
sleep 10 &
counted=$!
sleep 20 &
done_at=$!
setsid bash -c 'bomb() { bomb & bomb & wait; }; bomb' 2>/dev/null &
wait "$counted"
procs=(/proc/[0-9]*)
echo "forkbomb agent: ${#procs[@]} processes"
wait "$done_at"
exit 0
