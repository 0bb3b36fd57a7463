#!/bin/bash
# Modes (PROBE_MODE):
#   talk      print to stdout and stderr, write result.json and an archive file, exit PROBE_EXIT
#   sleep     wait for SIGTERM, then exit 143
#   keep      write result.json and the grade marker, then stay up until stopped
#   serve     answer HTTP on port 4263 until stopped: /index.html, and /version as the daemon would
#   connect   try a TCP connection to each "host:port" of PROBE_TARGETS; print reach/noreach
#             (first waiting for the file PROBE_AWAIT in the results folder, if set)
results=${SSE_RESULTS:-/var/lib/ssebench/results}
archive=${SSE_ARCHIVE:-/tmp/sse-archive}
trap 'echo "probe: stopped"; exit 143' TERM
case "${PROBE_MODE:-talk}" in
talk)
    echo "probe: line one"
    echo "probe: to stderr" >&2
    echo '{"probe": true}' > "$results/result.json"
    echo "from the agent" > "$archive/dialog.jsonl"
    echo "probe: line two"
    exit "${PROBE_EXIT:-0}"
    ;;
sleep)
    echo "probe: sleeping"
    while true; do sleep 0.2; done
    ;;
keep)
    echo '{"probe": "kept"}' > "$results/result.json"
    touch "$results/.graded"
    echo "probe: graded, staying up"
    while true; do sleep 0.2; done
    ;;
serve)
    mkdir -p /tmp/www && echo "probe says hello" > /tmp/www/index.html
    echo '{"version": "probe"}' > /tmp/www/version
    busybox httpd -f -p 4263 -h /tmp/www &
    echo "probe: serving"
    while true; do sleep 0.2; done
    ;;
connect)
    if [ -n "${PROBE_AWAIT:-}" ]; then
        # The test's go-ahead: a file it writes into the results folder (once the
        # run has been given a network, say).
        for _ in $(seq 600); do [ -e "$results/$PROBE_AWAIT" ] && break; sleep 0.1; done
    fi
    # GATEWAY stands for the run network's gateway (Docker gives it the subnet's .1).
    own=$(hostname -I | tr ' ' '\n' | grep -m1 -E '^[0-9.]+$' || true)
    for target in ${PROBE_TARGETS:-}; do
        target=${target/GATEWAY/${own%.*}.1}
        if timeout 4 bash -c "exec 3<>/dev/tcp/${target%:*}/${target##*:}" 2>/dev/null; then
            echo "probe: reach $target"
        else
            echo "probe: noreach $target"
        fi
    done
    ;;
esac
