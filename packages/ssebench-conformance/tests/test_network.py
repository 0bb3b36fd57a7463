"""The egress checks' servers: one process holds several suites (one per mode), each with
its own internet stand-in, and each suite removes only what it made."""

from __future__ import annotations

import subprocess
import urllib.request

import pytest

from ssebench.conformance._network import NETNS_PREFIX, Network

pytestmark = pytest.mark.process


def _namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in listed.stdout.splitlines() if line.startswith(NETNS_PREFIX)}


def _answer(address: str) -> bytes:
    with urllib.request.urlopen(f"http://{address}/", timeout=5) as response:
        return bytes(response.read())


def test_two_suites_in_one_process_each_have_a_standin_and_remove_only_their_own() -> None:
    before = _namespaces()
    first, second = Network(), Network()
    try:
        one, two = first.internet_standin(), second.internet_standin()
        assert one != two
        assert _answer(one) == _answer(two) == b"hello\n"
        made = _namespaces() - before
        assert len(made) == 2, made
        first.close()
        assert _answer(two) == b"hello\n"
        assert len(_namespaces() - before) == 1
        second.close()
        assert _namespaces() - before == set()
    finally:
        first.close()
        second.close()
