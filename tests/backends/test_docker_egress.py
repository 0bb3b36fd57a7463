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
from pathlib import Path
from typing import Any

import docker
import pytest

from ssebench.backends.docker import DockerRunHandle
from ssebench.spec import Backend, RunHandle, RunSpec, contract, labels

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
    backend: Backend[Any],
    start_run: StartRun,
    egress: str,
    targets: list[str],
    *,
    endpoint_first: bool = False,
) -> dict[str, bool]:
    """Which targets a probe run reaches; with `endpoint_first`, it probes only after
    `endpoint` was asked for it (which gives a restricted run its network)."""
    extra = {"PROBE_TARGETS": " ".join(targets), "PROBE_AWAIT": "go" if endpoint_first else ""}
    spec, handle = start_run("connect", egress=egress, extra_env=extra)
    if endpoint_first:
        backend.endpoint(handle, contract.DAEMON_PORT)
        (Path(spec.results.source) / "go").touch()
    assert backend.wait(handle, timeout=120) == 0
    found = {}
    for line in backend.logs(handle):
        match = re.fullmatch(r"probe: (reach|noreach) (\S+)", line)
        if match:
            found[match.group(2)] = match.group(1) == "reach"
    return found


def test_a_restricted_run_has_no_network_until_its_endpoint_is_asked_for(
    backend: Backend[Any], start_run: StartRun, docker_client: docker.DockerClient
) -> None:
    _, handle = start_run("serve", egress="restricted")
    assert isinstance(handle, DockerRunHandle) and handle.network
    container = docker_client.containers.get(handle.container_id)
    assert list(container.attrs["NetworkSettings"]["Networks"]) == ["none"]
    assert docker_client.networks.list(names=[handle.network]) == []

    url = backend.endpoint(handle, contract.DAEMON_PORT)
    network = docker_client.networks.get(handle.network)
    assert network.attrs["Internal"] is True
    assert network.attrs["Labels"][labels.RUN_ID] == handle.run_id
    assert network.attrs["Options"]["com.docker.network.bridge.name"].startswith("sseb-")
    container.reload()
    assert list(container.attrs["NetworkSettings"]["Networks"]) == [handle.network]
    assert backend.endpoint(handle, contract.DAEMON_PORT) == url, "asked again: the same address"

    backend.stop(handle, grace=1)
    backend.cleanup(handle)
    assert docker_client.networks.list(names=[handle.network]) == []


@pytest.mark.parametrize("endpoint_first", [False, True], ids=["no network", "own network"])
def test_a_restricted_run_reaches_neither_the_host_nor_the_internet_standin(
    backend: Backend[Any],
    start_run: StartRun,
    host_server: int,
    internet_standin: str,
    endpoint_first: bool,
) -> None:
    targets = [f"{host_primary_address()}:{host_server}", internet_standin]
    if endpoint_first:
        targets.append(f"GATEWAY:{host_server}")
    reached = probe_reaches(
        backend, start_run, "restricted", targets, endpoint_first=endpoint_first
    )
    assert len(reached) == len(targets), reached
    assert not any(reached.values()), reached
    if endpoint_first:  # the probe saw its network: GATEWAY became its bridge's address
        assert [t for t in reached if re.fullmatch(rf"(\d+\.){{3}}1:{host_server}", t)], reached


def test_a_restricted_run_cannot_reach_another_runs_daemon_port(
    backend: Backend[Any], start_run: StartRun
) -> None:
    _, other = start_run("serve")
    url = backend.endpoint(other, contract.DAEMON_PORT)
    address = url.removeprefix("http://")
    _wait_until_listening(*address.split(":")[0:1], contract.DAEMON_PORT)
    reached = probe_reaches(backend, start_run, "restricted", [address], endpoint_first=True)
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
