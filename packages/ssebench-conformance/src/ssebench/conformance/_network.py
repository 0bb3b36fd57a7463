"""Servers of our own that egress checks try to reach; no traffic leaves the machine.

One server listens on every address of this host; another stands in for the
internet: it runs in a network namespace the suite creates and routes through
the host (needs root and iproute2). Both are made when the first check asks
and torn down when the suite ends.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Final

from typing_extensions import override

NETNS_PREFIX: Final = "ssebtest-inet-"
"""The stand-in's network namespace is this, the process ID and the instance's number in
that process: parallel test workers, and the suites of one worker (one per mode), each
have their own."""

_INSTANCES: Final = itertools.count()

STANDIN_PORT: Final = 8099


def _addresses(pid: int, instance: int) -> tuple[str, str]:
    """The host side's and the stand-in's address: a /30 of 198.19.0.0/16 chosen by `pid`
    and `instance`, in the range reserved for benchmarks (RFC 2544), used only inside this
    machine. Workers started together have nearby process IDs, so their /30s differ."""
    first = ((pid % 4096) * 4 + instance % 4) * 4
    prefix = f"198.19.{first // 256}."
    return prefix + str(first % 256 + 1), prefix + str(first % 256 + 2)


# A bare TCP server: http.server looks its own name up, which would send DNS
# queries off this machine from inside the namespace.
_SERVER: Final = """
import socketserver, sys

class Answer(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(b"HTTP/1.0 200 OK\\r\\n\\r\\nhello\\n")

socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer((sys.argv[1], int(sys.argv[2])), Answer).serve_forever()
"""


class _Answer(socketserver.BaseRequestHandler):
    @override
    def handle(self) -> None:
        self.request.sendall(b"HTTP/1.0 200 OK\r\n\r\nhello\n")


def wait_until_listening(host: str, port: int, attempts: int = 100) -> None:
    """Return once a TCP connection to host:port succeeds.

    Raises:
        AssertionError: nothing listened within about ten seconds.
    """
    for _ in range(attempts):
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {host}:{port}")


def host_primary_address() -> str:
    """This host's address on its default route (a route lookup only: nothing is sent)."""
    route = subprocess.run(
        ["ip", "-4", "route", "get", "192.0.2.1"], capture_output=True, text=True, check=True
    ).stdout
    match = re.search(r"\bsrc (\S+)", route)
    assert match, route
    return match.group(1)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Network:
    """The host server and the internet stand-in, made on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._host: socketserver.ThreadingTCPServer | None = None
        self._standin: subprocess.Popen[bytes] | None = None
        self._namespace = False
        self._pid = os.getpid()
        self._instance = next(_INSTANCES)

    def host_server(self) -> int:
        """The port of a TCP server listening on every address of this host."""
        with self._lock:
            if self._host is None:
                self._host = socketserver.ThreadingTCPServer(("0.0.0.0", 0), _Answer)  # noqa: S104
                threading.Thread(target=self._host.serve_forever, daemon=True).start()
            return int(self._host.server_address[1])

    def internet_standin(self) -> str:
        """`address:port` of the internet's stand-in, reached through this host's routing.

        Raises:
            AssertionError: iproute2 is missing, or the namespace cannot be made (not root).
        """
        with self._lock:
            if self._standin is None:
                self._start_standin()
            return f"{_addresses(self._pid, self._instance)[1]}:{STANDIN_PORT}"

    def _start_standin(self) -> None:
        if shutil.which("ip") is None:
            raise AssertionError("iproute2 is needed to stand up the egress checks' namespace")
        _remove_stale_namespaces()  # what interrupted earlier suites may have left
        netns, host_link, standin_link = self._names()
        host_side, standin = _addresses(self._pid, self._instance)
        _ip("netns", "add", netns)
        self._namespace = True
        _ip("link", "add", host_link, "type", "veth", "peer", "name", standin_link)
        _ip("link", "set", standin_link, "netns", netns)
        _ip("addr", "add", f"{host_side}/30", "dev", host_link)
        _ip("link", "set", host_link, "up")
        _ip("-n", netns, "addr", "add", f"{standin}/30", "dev", standin_link)
        _ip("-n", netns, "link", "set", standin_link, "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        # No default route in the namespace: replies go to the host side, which is
        # directly connected (open runs are masqueraded to it), and nothing in the
        # namespace can send anywhere else.
        server = [sys.executable, "-c", _SERVER, standin, str(STANDIN_PORT)]
        self._standin = subprocess.Popen(["ip", "netns", "exec", netns, *server])
        wait_until_listening(standin, STANDIN_PORT)

    def _names(self) -> tuple[str, str, str]:
        """The namespace's name and its veth pair's (at most 15 characters each)."""
        key = f"{self._pid}x{self._instance}"
        return f"{NETNS_PREFIX}{key}", f"sb{key}h", f"sb{key}n"

    def _remove_namespace(self) -> None:
        netns, host_link, _ = self._names()
        subprocess.run(["ip", "link", "del", host_link], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True, check=False)

    def close(self) -> None:
        """Stop both servers and remove the namespace; safe to call more than once."""
        with self._lock:
            if self._host is not None:
                self._host.shutdown()
                self._host.server_close()
                self._host = None
            if self._standin is not None:
                self._standin.kill()
                self._standin.wait()
                self._standin = None
            if self._namespace:
                self._remove_namespace()
                self._namespace = False


def _remove_stale_namespaces() -> None:
    """Remove stand-in namespaces whose process is gone (deleting the namespace deletes
    the veth pair with it). This process's own are live suites': each closes its own."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    pattern = rf"^{re.escape(NETNS_PREFIX)}(\d+)x\d+\b"
    for found in re.finditer(pattern, listed.stdout, re.MULTILINE):
        if not Path(f"/proc/{found.group(1)}").exists():
            subprocess.run(["ip", "netns", "del", found.group(0)], capture_output=True, check=False)
