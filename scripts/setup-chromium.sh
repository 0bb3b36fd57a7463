#!/usr/bin/env bash
# Install Debian's headless-capable Chromium if it is missing; safe to run any number of times.
# The report tests open `ssebench report`'s HTML in it (as root: apt-get needs it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "setup-chromium: chromium is missing and only root can install it (apt-get install chromium)" >&2
    exit 1
fi
say "installing chromium (the report tests open the HTML report in it)"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
