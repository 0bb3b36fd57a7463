#!/usr/bin/env bash
# Set up what is missing for SSEBench on this machine; safe to run any number of times.
#   1. uv (from PyPI), on PATH (linked into /usr/local/bin: the README's commands
#      are `uv run ...`), and the workspace's packages (from uv.lock)
#   2. a Docker engine (Debian's docker.io), started in the background if none answers
#   3. the base image (SSEBENCH_BASE_IMAGE, default debian:bookworm-slim), bootstrapped
#      offline from Debian packages when missing; it is never pulled
#   4. the web page's front-end code (xterm.js) from npm into packages/ssebench-web/node_modules
#      (npm ci from its package-lock.json; never committed)
#   5. (as root) Debian's docker-registry for the tests of `images push` and `--prebuilt`,
#      its system service kept off
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_uv
link_uv
cd "$SSEBENCH_ROOT"
say "installing the workspace from uv.lock"
# Bytecode is compiled here, once: this machine type sets PYTHONDONTWRITEBYTECODE=1, so
# otherwise every pytest worker and every `ssebench` the tests start compiles each module it
# imports (the quick loop: 147 CPU-seconds without, 120 with).
"$UV" sync --all-packages --frozen --quiet --compile-bytecode
"$SSEBENCH_ROOT/.venv/bin/python" -m compileall -q -j 0 packages/*/src >/dev/null

if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing npm (for the front-end code of ssebench web)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null; }
fi
if command -v npm >/dev/null 2>&1; then
    say "installing the web page's front-end code (npm ci in packages/ssebench-web)"
    (cd "$SSEBENCH_ROOT/packages/ssebench-web" && npm ci --no-audit --no-fund --silent)
else
    say "npm is missing: ssebench web will say so until packages/ssebench-web has its node_modules"
fi

"$SSEBENCH_ROOT/scripts/setup-docker-engine.sh"
if [ "$(id -u)" = 0 ]; then
    "$SSEBENCH_ROOT/scripts/setup-test-registry.sh"
fi

if ! command -v debootstrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        say "installing debootstrap (to build the base image offline when it is missing)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
    fi
fi
"$SSEBENCH_ROOT/.venv/bin/ssebench" images bootstrap-base
say "done: the ssebench command is $SSEBENCH_ROOT/.venv/bin/ssebench (or 'uv run ssebench')"
