"""The three listeners in one asyncio loop, and the daemon's start-up."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Generator, Mapping, Sequence

import uvicorn
from typing_extensions import override

from ssebench.daemon._errors import ConfigError, DaemonError
from ssebench.daemon._users import lookup_identity
from ssebench.daemon.server._app import build_app
from ssebench.daemon.server._checks import Privileges
from ssebench.daemon.server._config import DaemonConfig, load_config
from ssebench.daemon.server._core import Daemon
from ssebench.daemon.server._diff import find_git
from ssebench.daemon.server._listening import bind_tcp, bind_unix
from ssebench.daemon.server._openapi import openapi_json
from ssebench.daemon.server._procs import UidKiller
from ssebench.spec import SSEBenchError, TaskConfig, contract, load_task_config

log = logging.getLogger("ssebench.daemon")


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to the daemon (three share one loop)."""

    @override
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def prepare_socket_dir(config: DaemonConfig) -> None:
    """The admin socket's directory: root's, 0700 (0711 when the agent's socket is there too)."""
    directory = config.admin_socket.parent
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    shared = config.agent_socket.parent == directory
    if os.geteuid() == 0:
        os.chown(directory, 0, 0)
    directory.chmod(0o711 if shared else 0o700)


def bind_all(config: DaemonConfig) -> list[tuple[socket.socket, bool]]:
    """Bind every listener: (socket, admin?)."""
    prepare_socket_dir(config)
    listeners = [
        (bind_unix(config.admin_socket, 0o600), True),
        (bind_unix(config.agent_socket, 0o666), False),
    ]
    if config.http_port is not None:
        listeners.append((bind_tcp(config.http_host, config.http_port), False))
    return listeners


class Listeners:
    """The uvicorn servers of one daemon; `stop` ends them all."""

    def __init__(self, daemon: Daemon, sockets: Sequence[tuple[socket.socket, bool]]) -> None:
        self.daemon = daemon
        self.sockets = list(sockets)
        self.servers = [
            _Server(
                uvicorn.Config(
                    build_app(daemon, admin=admin),
                    lifespan="off",
                    access_log=True,
                    server_header=False,
                    proxy_headers=False,
                    timeout_graceful_shutdown=5,
                    log_config=None,
                )
            )
            for _, admin in self.sockets
        ]

    async def serve(self) -> None:
        """Serve until `stop`."""
        await asyncio.gather(
            *(
                server.serve(sockets=[sock])
                for server, (sock, _) in zip(self.servers, self.sockets, strict=True)
            )
        )

    @property
    def started(self) -> bool:
        """Whether every listener accepts connections."""
        return all(server.started for server in self.servers)

    def stop(self) -> None:
        """Ask every listener to finish."""
        for server in self.servers:
            server.should_exit = True


def root_privileges() -> Privileges:
    """The users checks and the shell run as, looked up in the image.

    Raises:
        ConfigError: not root, or an account of the container contract is missing.
    """
    if os.geteuid() != 0:
        raise ConfigError("the daemon must run as root (it runs checks as sse-runner)")
    accounts = []
    for name in (contract.MODEL_USER, contract.RUNNER_USER):
        try:
            accounts.append(lookup_identity(name))
        except KeyError:
            raise ConfigError(
                f"the {name!r} account is missing: this is not an SSEBench tool image"
            ) from None
    model, runner = accounts
    for account in accounts:
        if account.uid == 0:
            raise ConfigError(f"the {account.name!r} account must not be root")
    return Privileges(model=model, runner=runner, killer=UidKiller())


async def run_daemon(
    config: DaemonConfig, task: TaskConfig, privileges: Privileges, environ: Mapping[str, str]
) -> None:
    """Take the baseline, bind the listeners, serve until SIGTERM or SIGINT."""
    daemon = Daemon(
        config=config, task=task, privileges=privileges, environ=environ, git=find_git(environ)
    )
    await daemon.start()
    listeners = Listeners(daemon, bind_all(config))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, listeners.stop)
    log.info(
        "listening: admin %s, agent %s, http %s; difficulty %d",
        config.admin_socket,
        config.agent_socket,
        config.http_port,
        config.difficulty,
    )
    try:
        await listeners.serve()
    finally:
        await daemon.close()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m ssebench.daemon`: run the daemon (as root, in a tool image).

    Returns:
        The exit status: 0 after SIGTERM, 2 when it refuses to start.
    """
    parser = argparse.ArgumentParser(prog="python -m ssebench.daemon")
    parser.add_argument("--print-openapi", action="store_true", help="print the OpenAPI document")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    if args.print_openapi:
        sys.stdout.buffer.write(openapi_json())
        return 0
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        config = load_config(os.environ)
        privileges = root_privileges()
        task = load_task_config(config.task_config)
    except (DaemonError, SSEBenchError) as exc:
        print(f"ssebench-daemon: refusing to start: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(run_daemon(config, task, privileges, dict(os.environ)))
    except DaemonError as exc:
        print(f"ssebench-daemon: {exc}", file=sys.stderr)
        return 1
    return 0
