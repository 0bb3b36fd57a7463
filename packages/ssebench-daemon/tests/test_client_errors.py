"""The daemon's clients turn every error code into a class of its own, under the package's root."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import pytest

from ssebench.daemon import DaemonError, ErrorCode
from ssebench.daemon._client import (
    REFUSALS,
    DaemonAdminOnlyError,
    DaemonConnectionError,
    DaemonForbiddenError,
    DaemonProtocolError,
    DaemonRefusedError,
    DaemonTimeoutError,
    DaemonUnreachableError,
    Reply,
    UnixHTTPClient,
    refusal,
)
from ssebench.daemon._client._api import DaemonApi


def answer(code: str | None, status: int = 400) -> Reply:
    body = b"{}" if code is None else f'{{"error": "no", "code": "{code}"}}'.encode()
    return Reply(status, body)


@pytest.mark.parametrize("code", get_args(ErrorCode))
def test_every_error_code_has_a_class_of_its_own(code: ErrorCode) -> None:
    error = refusal("asking", answer(code))
    assert type(error) is REFUSALS[code]
    assert type(error).code_of_class == code
    assert error.code == code
    assert isinstance(error, DaemonRefusedError) and isinstance(error, DaemonError)


def test_no_two_codes_share_a_class() -> None:
    assert len(set(REFUSALS.values())) == len(REFUSALS) == len(get_args(ErrorCode))


@pytest.mark.parametrize("code", [None, "a_code_from_a_newer_daemon"])
def test_an_answer_without_a_known_code_is_the_base_refusal(code: str | None) -> None:
    error = refusal("asking", answer(code, status=502))
    assert type(error) is DaemonRefusedError
    assert (error.status, error.code) == (502, None)


def test_the_message_names_the_call_the_status_and_the_daemons_words() -> None:
    error = refusal("prepare_grading", Reply(409, b'{"error": "no diff", "code": "conflict"}'))
    assert str(error) == "prepare_grading: the daemon answered 409: no diff"


@pytest.mark.parametrize(
    "cls",
    [DaemonConnectionError, DaemonUnreachableError, DaemonTimeoutError, DaemonProtocolError],
)
def test_every_client_error_is_a_daemon_error_and_the_matching_builtin(
    cls: type[DaemonError],
) -> None:
    builtin = {
        DaemonConnectionError: ConnectionError,
        DaemonUnreachableError: ConnectionError,
        DaemonTimeoutError: TimeoutError,
        DaemonProtocolError: ValueError,
    }[cls]
    assert issubclass(cls, DaemonError) and issubclass(cls, builtin)


def test_a_socket_nobody_listens_on_is_unreachable(tmp_path: Path) -> None:
    with pytest.raises(DaemonUnreachableError, match="nothing answers"):
        UnixHTTPClient(str(tmp_path / "none.sock")).get("/version", timeout=5)


def test_an_answer_cut_short_is_a_connection_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()

        def serve() -> None:
            peer, _ = server.accept()
            peer.recv(65536)
            peer.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nshort")
            peer.close()

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            with pytest.raises(DaemonConnectionError, match="mid-answer"):
                UnixHTTPClient(str(path)).get("/version", timeout=5)
        finally:
            thread.join(5)


def test_a_daemon_that_never_answers_is_a_timeout(tmp_path: Path) -> None:
    path = tmp_path / "mute.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()
        with pytest.raises(DaemonTimeoutError):
            UnixHTTPClient(str(path)).get("/version", timeout=0.3)


@pytest.mark.process
def test_the_real_daemon_refuses_an_admin_call_on_the_agents_socket_with_its_class(
    start_daemon: Callable[..., Any],
) -> None:
    running = start_daemon()
    api = DaemonApi(str(running.config.agent_socket))
    with pytest.raises(DaemonForbiddenError) as raised:
        api.prepare_grading(timeout=30)
    assert type(raised.value) is DaemonAdminOnlyError
    assert raised.value.status == 403
    assert isinstance(raised.value, PermissionError)
