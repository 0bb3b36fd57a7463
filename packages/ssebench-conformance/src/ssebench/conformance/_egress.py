"""Restricted and open egress, proven with servers of our own (docs/architecture.md).

A restricted run reaches the model proxy and nothing else: not this host, not
the internet (a stand-in in a network namespace routed through the host), not
another run's daemon. An open run reaches both. The host still reaches a
restricted run's daemon port through `endpoint`. The probe's connect mode
reports each target it tried (`probe: reach|noreach host:port`).
"""

from __future__ import annotations

import re
from pathlib import Path

from ssebench.conformance._harness import Harness
from ssebench.conformance._network import host_primary_address, wait_until_listening
from ssebench.spec import Egress, contract


def _probe_reaches(
    h: Harness, egress: Egress, targets: list[str], *, endpoint_first: bool = False
) -> dict[str, bool]:
    """Which targets a probe run reaches; with `endpoint_first`, it tries only after
    `endpoint` was asked for it (which gives a restricted run its network)."""
    env = {"PROBE_TARGETS": " ".join(targets), "PROBE_AWAIT": "go" if endpoint_first else ""}
    spec, handle = h.start("connect", egress=egress, env=env)
    if endpoint_first:
        h.backend.endpoint(handle, contract.DAEMON_PORT)
        (Path(spec.results.source) / "go").touch()
    assert h.backend.wait(handle, timeout=120) == 0
    found = {}
    for line in h.backend.logs(handle):
        match = re.fullmatch(r"probe: (reach|noreach) (\S+)", line)
        if match:
            found[match.group(2)] = match.group(1) == "reach"
    return found


def _restricted_run_reaches_nothing(h: Harness, *, endpoint_first: bool) -> None:
    port = h.network.host_server()
    targets = [f"{host_primary_address()}:{port}", h.network.internet_standin()]
    if endpoint_first:
        # GATEWAY: the probe puts in its own network's gateway (the subnet's .1).
        targets.append(f"GATEWAY:{port}")
    reached = _probe_reaches(h, "restricted", targets, endpoint_first=endpoint_first)
    assert len(reached) == len(targets), reached
    assert not any(reached.values()), reached
    if endpoint_first:  # the probe saw its network: GATEWAY became its bridge's address
        assert [t for t in reached if re.fullmatch(rf"(\d+\.){{3}}1:{port}", t)], reached


def a_restricted_run_reaches_neither_the_host_nor_the_internet_standin(h: Harness) -> None:
    _restricted_run_reaches_nothing(h, endpoint_first=False)


def a_restricted_run_with_its_endpoint_still_reaches_neither_the_host_nor_the_internet(
    h: Harness,
) -> None:
    _restricted_run_reaches_nothing(h, endpoint_first=True)


def a_restricted_run_cannot_reach_another_runs_daemon_port(h: Harness) -> None:
    _, other = h.start("serve")
    address = h.backend.endpoint(other, contract.DAEMON_PORT).removeprefix("http://")
    wait_until_listening(address.split(":")[0], contract.DAEMON_PORT)
    reached = _probe_reaches(h, "restricted", [address], endpoint_first=True)
    assert reached == {address: False}


def an_open_run_reaches_the_host_and_the_internet_standin(h: Harness) -> None:
    targets = [f"{host_primary_address()}:{h.network.host_server()}", h.network.internet_standin()]
    reached = _probe_reaches(h, "open", targets)
    assert reached == dict.fromkeys(targets, True)


def the_host_still_reaches_a_restricted_runs_daemon_port(h: Harness) -> None:
    _, handle = h.start("serve", egress="restricted")
    host, port = h.backend.endpoint(handle, contract.DAEMON_PORT).removeprefix("http://").split(":")
    wait_until_listening(host, int(port))
