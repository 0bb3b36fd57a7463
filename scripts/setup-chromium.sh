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
# Parallel test workers may all ask at once: one installs, the others wait and find it.
exec 9>/var/lock/ssebench-setup-chromium.lock
flock 9
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
say "installing chromium (the report tests open the HTML report in it)"
# Lock::Timeout: another apt (set-up of the cluster, say) may hold dpkg's lock for a while.
install=(apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends chromium)
DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null \
    || { apt-get update -qq -o DPkg::Lock::Timeout=600 && DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null; }
