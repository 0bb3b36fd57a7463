#!/usr/bin/env bash
# Make sure a Docker engine answers. Installs Debian's docker.io when no engine
# binary exists and starts dockerd in the background when none answers; the
# engine is left running so later commands and test runs reuse it.
# Idempotent: a second call with an engine up does nothing.
set -euo pipefail

log=${SSEBENCH_DOCKERD_LOG:-/var/log/ssebench-dockerd.log}
wait_seconds=${SSEBENCH_DOCKERD_WAIT:-120}

say() { printf 'setup: %s\n' "$*" >&2; }

if docker info >/dev/null 2>&1; then
    say "docker engine answers"
    exit 0
fi

if [ "$(id -u)" != 0 ]; then
    say "no docker engine answers and installing one needs root; start one or rerun as root"
    exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
    say "installing Debian's docker.io (engine, containerd, runc)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null
fi
# The Debian package ships a CLI; a newer one elsewhere on PATH is fine too.
command -v docker >/dev/null 2>&1 || { say "docker CLI missing after install"; exit 1; }

if [ -S /var/run/docker.sock ] && ! pgrep -x dockerd >/dev/null 2>&1; then
    rm -f /var/run/docker.sock /var/run/docker.pid
fi
if ! pgrep -x dockerd >/dev/null 2>&1; then
    say "starting dockerd in the background (log: $log)"
    mkdir -p "$(dirname "$log")"
    # setsid: the engine must outlive this script and the shell that ran it.
    setsid dockerd >>"$log" 2>&1 </dev/null &
fi

for _ in $(seq "$wait_seconds"); do
    if docker info >/dev/null 2>&1; then
        say "docker engine is up"
        exit 0
    fi
    sleep 1
done
say "dockerd did not answer within ${wait_seconds}s; last lines of $log:"
tail -n 20 "$log" >&2 || true
exit 1
