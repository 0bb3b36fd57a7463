#!/bin/bash
# The probe image's stand-in for SSEBench's runtime Python (contract.RUNTIME_PYTHON), so
# that probes make a checker pair (SidecarPair.checker): the backend starts the checker as
# `-I -m ssebench.daemon.entrypoint --agent-container`, the agent container as
# `-I -m ssebench.daemon.launcher CMD...`, and reports the agent's end in the checker as
# `-I -m ssebench.daemon.report STATUS`. Nothing else calls it.
if [ "${1:-}" != -I ] || [ "${2:-}" != -m ] || [ -z "${3:-}" ]; then
    echo "probe runtime: only -I -m MODULE [ARG...]" >&2
    exit 2
fi
module=$3
shift 3
results=${SSE_RESULTS:-/var/lib/ssebench/results}
archive=${SSE_ARCHIVE:-/tmp/sse-archive}
report=/tmp/probe-agent-status
go=/run/ssebench/agent-go
case $module in
ssebench.daemon.entrypoint)
    # The checker: hands the archive to model, lets the agent start, and ends the run
    # once the backend reported the agent's end.
    trap 'echo "probe checker: stopped"; exit 143' TERM
    chown 1000:1000 "$archive" && touch "$go"
    echo "probe checker: waiting for the agent's end"
    while [ ! -s "$report" ]; do sleep 0.1; done
    echo "{\"agent_status\": $(cat "$report"), \"checker_uid\": $(id -u)}" > "$results/result.json"
    echo "probe checker: the agent ended with $(cat "$report")"
    exit 0
    ;;
ssebench.daemon.launcher)
    # The agent container: once the checker lets it start, who runs here, with what,
    # beside what, then the probe itself.
    for _ in $(seq 600); do [ -e "$go" ] && break; sleep 0.1; done
    {
        echo "uid $(id -u) gid $(id -g)"
        grep -E '^Cap(Prm|Eff|Bnd):' /proc/self/status
        ps -eo uid= | sort -un | sed 's/^ */process uid /'
        if [ -e "$results" ]; then echo "results present"; else echo "results absent"; fi
    } > "$archive/agent-view.txt"
    exec /bin/bash /probe/probe.sh "$@"
    ;;
ssebench.daemon.report)
    echo "$1" > "$report.new" && mv "$report.new" "$report"
    ;;
*)
    echo "probe runtime: no module $module" >&2
    exit 2
    ;;
esac
