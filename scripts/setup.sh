#!/usr/bin/env bash
# Set up what is missing for SSEBench on this machine; safe to run any number of times.
#   1. uv (from PyPI) and the workspace's packages (from uv.lock)
#   2. a Docker engine (Debian's docker.io), started in the background if none answers
#   3. the base image (SSEBENCH_BASE_IMAGE, default debian:bookworm-slim), bootstrapped
#      offline from Debian packages when missing; it is never pulled
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_uv
cd "$SSEBENCH_ROOT"
say "installing the workspace from uv.lock"
"$UV" sync --all-packages --frozen --quiet

"$SSEBENCH_ROOT/scripts/setup-docker-engine.sh"

if ! command -v debootstrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        say "installing debootstrap (to build the base image offline when it is missing)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
    fi
fi
"$SSEBENCH_ROOT/.venv/bin/ssebench" images bootstrap-base
say "done: the ssebench command is $SSEBENCH_ROOT/.venv/bin/ssebench (or 'uv run ssebench')"
