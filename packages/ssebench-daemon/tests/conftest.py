"""The daemon on temporary Unix sockets, served by uvicorn in a thread, driven by httpx."""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest

from ssebench.daemon import Daemon, DaemonConfig, Listeners, Privileges, bind_all
from ssebench.spec import load_task_config

from .boxes import Box, start_box
from .fakes import FakeTask, fake_privileges, make_task


@pytest.fixture
def sockets() -> Iterator[Path]:
    """A short directory for sockets (Unix socket paths are limited to 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="sse-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def task(tmp_path: Path, sockets: Path) -> FakeTask:
    return make_task(tmp_path, sockets)


@dataclass
class Running:
    """A daemon serving on temporary sockets, and clients for each listener."""

    daemon: Daemon
    config: DaemonConfig
    privileges: Privileges
    agent: httpx.Client
    admin: httpx.Client
    http: httpx.Client
    loop: asyncio.AbstractEventLoop

    @property
    def agent_facing(self) -> tuple[httpx.Client, httpx.Client]:
        """The agent-facing socket and HTTP port."""
        return (self.agent, self.http)

    def call(self, coro_factory: Callable[[], object]) -> object:
        """Run a coroutine on the daemon's loop."""
        future = asyncio.run_coroutine_threadsafe(coro_factory(), self.loop)  # type: ignore[arg-type]
        return future.result(60)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _client(path: Path) -> httpx.Client:
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(path)), base_url="http://daemon", timeout=120
    )


@pytest.fixture
def start_daemon(task: FakeTask) -> Iterator[Callable[..., Running]]:
    """Start the daemon (optionally with other settings); stopped after the test."""
    stops: list[Callable[[], None]] = []

    def start(privileges: Privileges | None = None, **overrides: object) -> Running:
        overrides.setdefault("http_port", free_port())
        config = replace(task.config, **overrides)  # type: ignore[arg-type]
        privs = privileges or fake_privileges()
        ready = threading.Event()
        box: dict[str, object] = {}

        async def main() -> None:
            daemon = Daemon(
                config=config,
                task=load_task_config(config.task_config),
                privileges=privs,
                environ={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
            )
            try:
                await daemon.start()
                listeners = Listeners(daemon, bind_all(config))
            except BaseException as exc:
                box["error"] = exc
                ready.set()
                raise
            box.update(daemon=daemon, listeners=listeners, loop=asyncio.get_running_loop())
            serving = asyncio.ensure_future(listeners.serve())
            while not listeners.started and not serving.done():
                await asyncio.sleep(0.01)
            ready.set()
            try:
                await serving
            finally:
                await daemon.close()
                await privs.killer.kill_all(privs.model)

        thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
        thread.start()
        assert ready.wait(60), "the daemon did not start"
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        listeners: Listeners = box["listeners"]  # type: ignore[assignment]
        loop: asyncio.AbstractEventLoop = box["loop"]  # type: ignore[assignment]
        agent, admin = _client(config.agent_socket), _client(config.admin_socket)
        http = httpx.Client(base_url=f"http://127.0.0.1:{config.http_port}", timeout=120)

        def stop() -> None:
            agent.close()
            admin.close()
            http.close()
            loop.call_soon_threadsafe(listeners.stop)
            thread.join(30)

        stops.append(stop)
        return Running(
            daemon=box["daemon"],  # type: ignore[arg-type]
            config=config,
            privileges=privs,
            agent=agent,
            admin=admin,
            http=http,
            loop=loop,
        )

    yield start
    for stop in reversed(stops):
        stop()


@pytest.fixture
def running(start_daemon: Callable[..., Running]) -> Running:
    """The daemon at difficulty 0 on the fake task."""
    return start_daemon()


StartBox = Callable[..., Box]
"""`daemon_in(task_id, **env)`: the daemon as root in a new container of the task's tool image."""


@pytest.fixture
def daemon_in(tool_image: Callable[..., str]) -> Iterator[StartBox]:
    """Start daemons in tool-image containers of the demo tasks; removed after the test."""
    started: list[Box] = []

    def start(task_id: str, **env: str) -> Box:
        box = start_box(tool_image(task_id), **env)
        started.append(box)
        return box

    yield start
    for box in started:
        box.remove()
