"""Restricted and open egress of Docker runs, proven with test servers of our own.

Every server is on this machine: one on the host, one in a network namespace
the test creates and routes through the host (standing in for the internet),
and another run's daemon port. No traffic leaves the machine.
"""

from __future__ import annotations

import re
import shutil
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ssebench.spec import Backend, RunHandle, RunSpec, contract

pytestmark = pytest.mark.docker

StartRun = Callable[..., tuple[RunSpec, RunHandle]]

NETNS = "ssebtest-inet"
# A range reserved for benchmarks (RFC 2544), used only inside this machine.
HOST_SIDE, STANDIN = "198.18.7.1", "198.18.7.2"
STANDIN_PORT = 8099


# A bare TCP server: http.server looks its own name up, which would send DNS
# queries off this machine from inside the namespace.
SERVER = """
import socketserver, sys

class Answer(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(b"HTTP/1.0 200 OK\\r\\n\\r\\nhello\\n")

socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer((sys.argv[1], int(sys.argv[2])), Answer).serve_forever()
"""


@pytest.fixture(scope="module")
def host_server() -> Iterator[int]:
    """A TCP server on every address of the host; yields its port."""

    class Answer(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.sendall(b"HTTP/1.0 200 OK\r\n\r\nhello\n")

    server = socketserver.ThreadingTCPServer(("0.0.0.0", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def internet_standin() -> Iterator[str]:
    """A server in a network namespace of our own, reached through the host's routing."""
    if shutil.which("ip") is None:
        pytest.fail("iproute2 is needed to stand up the test's network namespace")
    # What an interrupted earlier session may have left.
    subprocess.run(["ip", "link", "del", "ssebt-h"], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)
    _ip("netns", "add", NETNS)
    server = None
    try:
        _ip("link", "add", "ssebt-h", "type", "veth", "peer", "name", "ssebt-n")
        _ip("link", "set", "ssebt-n", "netns", NETNS)
        _ip("addr", "add", f"{HOST_SIDE}/30", "dev", "ssebt-h")
        _ip("link", "set", "ssebt-h", "up")
        _ip("-n", NETNS, "addr", "add", f"{STANDIN}/30", "dev", "ssebt-n")
        _ip("-n", NETNS, "link", "set", "ssebt-n", "up")
        _ip("-n", NETNS, "link", "set", "lo", "up")
        # No default route in the namespace: replies go to the host side, which
        # is directly connected (open runs are masqueraded to it), and nothing
        # in the namespace can send anywhere else.
        server = subprocess.Popen(
            ["ip", "netns", "exec", NETNS, sys.executable, "-c", SERVER, STANDIN, str(STANDIN_PORT)]
        )
        _wait_until_listening(STANDIN, STANDIN_PORT)
        yield f"{STANDIN}:{STANDIN_PORT}"
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", "ssebt-h"], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)


def _wait_until_listening(host: str, port: int) -> None:
    import socket

    for _ in range(100):
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the stand-in server at {host}:{port} never listened")


def host_primary_address() -> str:
    # A route lookup only: nothing is sent.
    route = subprocess.run(
        ["ip", "-4", "route", "get", "192.0.2.1"], capture_output=True, text=True, check=True
    ).stdout
    match = re.search(r"\bsrc (\S+)", route)
    assert match, route
    return match.group(1)


def probe_reaches(
    backend: Backend[Any], start_run: StartRun, egress: str, targets: list[str]
) -> dict[str, bool]:
    _, handle = start_run("connect", egress=egress, extra_env={"PROBE_TARGETS": " ".join(targets)})
    assert backend.wait(handle, timeout=120) == 0
    found = {}
    for line in backend.logs(handle):
        match = re.fullmatch(r"probe: (reach|noreach) (\S+)", line)
        if match:
            found[match.group(2)] = match.group(1) == "reach"
    return found


def test_a_restricted_run_reaches_neither_the_host_nor_the_internet_standin(
    backend: Backend[Any], start_run: StartRun, host_server: int, internet_standin: str
) -> None:
    targets = [
        f"GATEWAY:{host_server}",
        f"{host_primary_address()}:{host_server}",
        internet_standin,
    ]
    reached = probe_reaches(backend, start_run, "restricted", targets)
    assert len(reached) == 3, reached
    assert not any(reached.values()), reached


def test_a_restricted_run_cannot_reach_another_runs_daemon_port(
    backend: Backend[Any], start_run: StartRun
) -> None:
    _, other = start_run("serve")
    url = backend.endpoint(other, contract.DAEMON_PORT)
    address = url.removeprefix("http://")
    _wait_until_listening(*address.split(":")[0:1], contract.DAEMON_PORT)
    reached = probe_reaches(backend, start_run, "restricted", [address])
    assert reached == {address: False}


def test_an_open_run_reaches_the_host_and_the_internet_standin(
    backend: Backend[Any], start_run: StartRun, host_server: int, internet_standin: str
) -> None:
    targets = [f"{host_primary_address()}:{host_server}", internet_standin]
    reached = probe_reaches(backend, start_run, "open", targets)
    assert reached == dict.fromkeys(targets, True)


def test_the_host_still_reaches_a_restricted_runs_daemon_port(
    backend: Backend[Any], start_run: StartRun
) -> None:
    _, handle = start_run("serve", egress="restricted")
    url = backend.endpoint(handle, contract.DAEMON_PORT)
    host, port = url.removeprefix("http://").split(":")
    _wait_until_listening(host, int(port))
