"""Starting the daemon and the MCP server side by side, and waiting until both answer."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ssebench.daemon._client import DaemonUnreachableError, UnixHTTPClient
from ssebench.daemon._environ import REPORT_FD_ENV
from ssebench.daemon._users import signal_group
from ssebench.daemon.entrypoint._files import log_tail, open_log
from ssebench.daemon.entrypoint._procs import Children, Wakeup
from ssebench.daemon.entrypoint._settings import Settings
from ssebench.spec import contract

POLL: float = 0.01
"""Seconds between readiness probes."""

MCP_NICENESS = 5
"""The MCP server loads its SDK (CPU-bound, a second or more) when its first client
connects, perhaps while a check runs: the checks and the daemon go first."""


class ServiceError(Exception):
    """A service did not come up; `log` is the tail of its log."""

    def __init__(self, message: str, *, service: str, log: str = "") -> None:
        super().__init__(message)
        self.service = service
        self.log = log


class StopRequestedError(Exception):
    """A stop signal arrived while waiting."""


@dataclass
class Service:
    """One background service: how to tell it is up, and its process once started."""

    name: str
    log_name: str
    argv: list[str]
    env: dict[str, str]
    ready: Callable[[], bool]
    ready_word: str = "ready"
    """What passing `ready` means, for the log: "ready" (it answers) or "listening"."""
    niceness: int = 0
    """Added to its scheduling niceness: the agent waits for the daemon, not for this."""
    pass_fds: tuple[int, ...] = ()
    """Descriptors it inherits (the daemon: the entrypoint's report pipe)."""
    proc: subprocess.Popen[bytes] | None = None
    ready_after: float | None = None
    """Seconds from the start of the wait until it answered."""


def service_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A service's environment: the container's, without the model key."""
    return {name: value for name, value in environ.items() if name not in contract.SECRET_ENV}


def daemon_ready(admin_socket: Path) -> Callable[[], bool]:
    """Ready = the admin socket answers `GET /version` with 200."""
    client = UnixHTTPClient(str(admin_socket))

    def probe() -> bool:
        try:
            return client.get("/version", timeout=2.0).ok
        except (DaemonUnreachableError, ConnectionError, TimeoutError, OSError):
            return False

    return probe


def tcp_listening(host: str, port: int) -> Callable[[], bool]:
    """Ready = a socket listens on host:port, learnt from /proc/net/tcp without connecting.

    A connection would be the MCP server's first client, which makes it load its SDK.
    """
    address = ipaddress.ip_address(host)
    table = Path("/proc/net/tcp6" if address.version == 6 else "/proc/net/tcp")
    # The kernel prints the address as 32-bit words in host byte order.
    packed = address.packed
    words = [packed[i : i + 4] for i in range(0, len(packed), 4)]
    if sys.byteorder == "little":
        words = [word[::-1] for word in words]
    wanted = f"{b''.join(words).hex().upper()}:{port:04X}"
    wildcard = f"{'0' * len(packed) * 2}:{port:04X}"

    def probe() -> bool:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            return False
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == _TCP_LISTEN and fields[1] in (wanted, wildcard):
                return True
        return False

    return probe


_TCP_LISTEN = "0A"
"""The state column of a listening socket in /proc/net/tcp."""


@dataclass
class Services:
    """The services of one run, started by `start` and stopped by `stop`."""

    settings: Settings
    children: Children
    wakeup: Wakeup
    services: list[Service] = field(default_factory=list)
    started: float = 0.0
    """When `start` began (time.monotonic)."""
    report_fd: int | None = None
    """The write end of the entrypoint's report pipe, handed to the daemon alone
    (`REPORT_FD_ENV`); None when the agent runs beside the entrypoint."""

    def plan(self) -> list[Service]:
        """The daemon and the MCP server."""
        settings = self.settings
        env = service_env(settings.environ)
        env.setdefault(contract.ENV_DAEMON_SOCKET, settings.agent_socket)
        env[contract.ENV_RESULTS] = str(settings.results_dir)
        env[contract.ENV_ARCHIVE] = str(settings.archive_dir)
        daemon_env = dict(env)
        if self.report_fd is not None:
            daemon_env[REPORT_FD_ENV] = str(self.report_fd)
        daemon = Service(
            name="daemon",
            log_name="daemon.log",
            argv=settings.daemon_command(),
            env=daemon_env,
            ready=daemon_ready(settings.admin_socket),
            pass_fds=() if self.report_fd is None else (self.report_fd,),
        )
        mcp = Service(
            name="MCP server",
            log_name="mcp.log",
            argv=settings.mcp_command(),
            env=env,
            # It checks its settings and binds its port; its SDK loads when the first
            # client connects (who waits in the listen queue meanwhile).
            ready=tcp_listening(settings.mcp_host, settings.mcp_port),
            ready_word="listening",
            niceness=MCP_NICENESS,
        )
        return [daemon, mcp]

    def start(self) -> list[Service]:
        """Start every service at once and wait until each answers.

        Returns:
            The services, each with the seconds it took to answer.

        Raises:
            ServiceError: one exited, could not be started, or did not answer in time;
                the message names it and says why.
            StopRequestedError: a stop signal arrived.
        """
        self.services = self.plan()
        self.started = started = time.monotonic()
        for service in self.services:
            if service.argv:
                self._spawn(service)
        deadline = started + self.settings.start_timeout
        waiting = list(self.services)
        while waiting:
            self.children.reap()
            if self.wakeup.stopping:
                raise StopRequestedError
            for service in list(waiting):
                proc = service.proc
                if proc is not None and proc.returncode is not None:
                    raise ServiceError(
                        f"the {service.name} exited with status {proc.returncode} "
                        f"before it answered; see {service.log_name}",
                        service=service.name,
                        log=log_tail(self.settings.results_dir, service.log_name),
                    )
                if service.ready():
                    service.ready_after = time.monotonic() - started
                    waiting.remove(service)
            if not waiting:
                break
            if time.monotonic() >= deadline:
                names = " and the ".join(service.name for service in waiting)
                service = waiting[0]
                raise ServiceError(
                    f"the {names} did not answer within {self.settings.start_timeout:g} s; "
                    f"see {service.log_name}",
                    service=service.name,
                    log=log_tail(self.settings.results_dir, service.log_name),
                )
            self.wakeup.wait(POLL)
        return self.services

    def _spawn(self, service: Service) -> None:
        log = open_log(self.settings.results_dir, service.log_name)
        try:
            service.proc = self.children.spawn(
                service.argv,
                env=service.env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
                pass_fds=service.pass_fds,
            )
        except OSError as exc:
            raise ServiceError(
                f"cannot start the {service.name} ({service.argv[0]}): {exc.strerror or exc}",
                service=service.name,
            ) from exc
        finally:
            os.close(log)
        if service.niceness:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, service.proc.pid, service.niceness)

    def dead(self) -> list[Service]:
        """Services that were started and have exited since."""
        self.children.reap()
        return [s for s in self.services if s.proc is not None and s.proc.returncode is not None]

    def stop(self, *, graceful: bool = True) -> None:
        """SIGTERM every service, SIGKILL what is left after the wait; return when all ended.

        With `graceful=False` every service gets SIGKILL at once: after grading they hold
        nothing worth a clean exit (each check's log is written as the check ends), and
        the run's wall time should not wait for web servers to shut down.
        """
        running = [
            s.proc for s in self.services if s.proc is not None and s.proc.returncode is None
        ]
        for proc in running:
            signal_group(proc.pid, signal.SIGTERM if graceful else signal.SIGKILL)
        deadline = time.monotonic() + (self.settings.service_stop_wait if graceful else 0.0)
        for proc in running:
            if self.children.wait(proc, max(0.0, deadline - time.monotonic()), self.wakeup) is None:
                signal_group(proc.pid, signal.SIGKILL)
                self.children.wait(proc, 5.0, self.wakeup)
