#!/usr/bin/env bash
# Install Debian's docker-registry, the registry the tests of `ssebench images push` and
# `--prebuilt` start on 127.0.0.1 (a fixture runs it with its own port and storage), and
# skopeo, with which they pull the pushed names into an empty store of its own.
# Safe to run any number of times. The package ships a system service serving on :5000;
# it is stopped and disabled here, so nothing of it keeps running after the install.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if ! command -v docker-registry >/dev/null 2>&1 || ! command -v skopeo >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        say "docker-registry or skopeo is missing: run this script as root to install them"
        exit 1
    fi
    say "installing docker-registry and skopeo (the tests' local registry and its client)"
    # policy-rc.d 101 keeps the package's service from starting during the install.
    policy=/usr/sbin/policy-rc.d
    made_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        made_policy=1
    fi
    install() {
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            docker-registry skopeo >/dev/null
    }
    status=0
    install || { apt-get update -qq && install; } || status=$?
    if [ -n "$made_policy" ]; then rm -f "$policy"; fi
    [ "$status" = 0 ] || exit "$status"
fi

# Whatever started it (a systemd machine ignores policy-rc.d), the service stays off.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl disable --now docker-registry.service >/dev/null 2>&1 || true
elif [ -x /etc/init.d/docker-registry ]; then
    /etc/init.d/docker-registry stop >/dev/null 2>&1 || true
    update-rc.d docker-registry disable >/dev/null 2>&1 || true
fi
