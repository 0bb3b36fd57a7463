"""The agent container's liveness as the checker answers it (`entrypoint/_alive.py`): 200
until the kill file exists, then 503; a connection the agent holds open delays the next
answer by the request timeout at most, and nothing of it reaches the checker's stderr."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssebench.daemon._errors import ConfigError
from ssebench.daemon.entrypoint._alive import REQUEST_TIMEOUT, AliveServer
from ssebench.daemon.entrypoint._settings import AGENT_CONTAINER_FLAG, load_settings
from ssebench.spec import contract


@pytest.fixture
def alive(tmp_path: Path) -> Iterator[AliveServer]:
    server = AliveServer(tmp_path / "kill", 0, host="127.0.0.1")
    server.start()
    yield server
    server.stop()


def _status(server: AliveServer) -> int:
    url = f"http://127.0.0.1:{server.port}/agent"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def test_alive_until_the_kill_file_exists_then_ended_for_good(
    alive: AliveServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert _status(alive) == 200
    (tmp_path / "kill").touch()
    assert _status(alive) == 503
    assert _status(alive) == 503
    assert capfd.readouterr().err == ""


def test_a_connection_held_open_delays_the_next_answer_by_the_request_timeout_at_most(
    alive: AliveServer,
) -> None:
    with socket.create_connection(("127.0.0.1", alive.port)) as held:
        held.sendall(b"GET /agent HTTP/1.1\r\n")  # and never the rest
        started = time.monotonic()
        assert _status(alive) == 200
        assert time.monotonic() - started < REQUEST_TIMEOUT + 3


def test_a_taken_port_is_an_error_when_the_server_is_made(
    alive: AliveServer, tmp_path: Path
) -> None:
    with pytest.raises(OSError):
        AliveServer(tmp_path / "kill", alive.port, host="127.0.0.1")


def test_only_a_checker_gets_a_kill_file_and_it_is_an_absolute_path() -> None:
    env = {contract.ENV_AGENT_KILL_FILE: "/run/ssebench-control/kill"}
    settings = load_settings([AGENT_CONTAINER_FLAG], env)
    assert settings.agent_kill_file == Path("/run/ssebench-control/kill")
    assert load_settings([AGENT_CONTAINER_FLAG], {}).agent_kill_file is None
    for argv, value in (([AGENT_CONTAINER_FLAG], "kill"), (["/bin/true"], "/kill")):
        with pytest.raises(ConfigError, match=f"{contract.ENV_AGENT_KILL_FILE} must be"):
            load_settings(argv, {contract.ENV_AGENT_KILL_FILE: value})
