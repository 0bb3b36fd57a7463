"""Restricted egress: a run from which nothing can be reached.

A restricted run starts without any network (only its loopback interface).
When something must reach it (`ssebench runs endpoint` asking for port 4263),
it is given a network of its own: an internal Docker network, which has no
route out. A container on one can still open connections to the host's own
addresses (the bridge's gateway, the host's primary address): those arrive
through the host's INPUT chain. Every restricted run's bridge is therefore
named with one prefix, and a single host rule drops every new connection that
comes in on such a bridge. Connections the host opens to the run are
unaffected: their replies are not new.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from typing import Final

from ssebench.spec import BackendError, Egress

RESTRICTED_BRIDGE_PREFIX: Final = "sseb-"
"""Bridge names of restricted runs; the host rule matches `sseb+`."""

OPEN_BRIDGE_PREFIX: Final = "ssebo-"
"""Bridge names of open runs (no host rule)."""

GUARD_COMMENT: Final = "ssebench: restricted runs open no connection to this host"
"""Marks SSEBench's host rule."""

_RULE: Final = (
    "INPUT",
    "-i",
    RESTRICTED_BRIDGE_PREFIX + "+",
    "-m",
    "conntrack",
    "--ctstate",
    "NEW",
    "-m",
    "comment",
    "--comment",
    GUARD_COMMENT,
    "-j",
    "DROP",
)


def bridge_name(egress: Egress) -> str:
    """A fresh bridge interface name (at most 15 characters, the kernel's limit)."""
    prefix = RESTRICTED_BRIDGE_PREFIX if egress == "restricted" else OPEN_BRIDGE_PREFIX
    return prefix + secrets.token_hex(8)[: 15 - len(prefix)]


def _tools() -> list[str]:
    return [tool for tool in ("iptables", "ip6tables") if shutil.which(tool)]


def ensure_host_guard() -> None:
    """Make sure the host drops new connections from restricted runs' bridges.

    Idempotent: the rule is added once, at the top of INPUT, for IPv4 and IPv6.

    Raises:
        BackendError: not root, or iptables is missing or refuses.
    """
    if os.geteuid() != 0:
        raise BackendError(
            "restricted egress needs root to install its host firewall rule (iptables); "
            "run as root, or choose --egress open"
        )
    tools = _tools()
    if "iptables" not in tools:
        raise BackendError("restricted egress needs iptables on the host: apt-get install iptables")
    for tool in tools:
        check = subprocess.run([tool, "-w", "-C", *_RULE], capture_output=True, check=False)
        if check.returncode == 0:
            continue
        argv = [tool, "-w", "-I", _RULE[0], "1", *_RULE[1:]]
        insert = subprocess.run(argv, capture_output=True, text=True, check=False)
        if insert.returncode != 0:
            raise BackendError(f"{tool} refused SSEBench's host rule: {insert.stderr.strip()}")
