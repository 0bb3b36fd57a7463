"""The terminal's WebSocket: a pty running the backend's exec command, marking the run touched."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from ssebench.spec import contract
from ssebench.spec.touched import touched_at
from ssebench.web._app import create_app
from ssebench.web._assets import node_modules

from .conftest import TOKEN, ReachingBackend, fake_run, record, summary

pytestmark = pytest.mark.process  # the shell is a real process on a real pty

ORIGIN = {"origin": "http://testserver"}


def _read_until(socket: object, wanted: bytes) -> bytes:
    seen = b""
    while wanted not in seen:
        seen += socket.receive_bytes()  # type: ignore[attr-defined]
    return seen


def graded_run(backend: ReachingBackend, results: Path, *, graded: bool = True) -> Path:
    """A running (kept) run `r1` and its run directory, graded or not yet."""
    backend.add_run(fake_run("r1", results))
    run_dir = results / "probe-task/none/probe/r1"
    run_dir.mkdir(parents=True)
    if graded:
        (run_dir / contract.GRADED_MARKER).write_text("passed\n")
    return run_dir


def test_the_terminal_runs_the_exec_command_on_a_pty_as_model_and_marks_the_run(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    run_dir = graded_run(backend, results)
    with client.websocket_connect("/api/runs/r1/terminal", headers=ORIGIN) as socket:
        # model's shell is in the agent's container.
        assert b"user=model in=agent" in _read_until(socket, b"user=model")
        socket.send_text('{"cols": 100, "rows": 30}')
        socket.send_bytes(b"stty size; tty\n")
        seen = _read_until(socket, b"/dev/pts/")
        assert b"30 100" in seen
    assert touched_at(run_dir) is not None


def test_no_terminal_on_a_run_that_is_not_running(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    backend.add_run(fake_run("r1", results, state="exited"))
    record(results, "r1", summary("r1", "2025-01-01T00:00:00Z"))
    with (
        pytest.raises(WebSocketDisconnect),
        client.websocket_connect("/api/runs/r1/terminal", headers=ORIGIN),
    ):
        pass


def test_no_terminal_on_a_backend_without_exec(
    client: TestClient, backend: ReachingBackend, results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ReachingBackend, "supports_exec", False)
    backend.add_run(fake_run("r1", results))
    (results / "probe-task/none/probe/r1").mkdir(parents=True)
    with (
        pytest.raises(WebSocketDisconnect),
        client.websocket_connect("/api/runs/r1/terminal", headers=ORIGIN),
    ):
        pass
    assert touched_at(results / "probe-task/none/probe/r1") is None


def test_a_shell_that_cannot_be_recorded_is_not_opened(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    run_dir = graded_run(backend, results)
    (run_dir / "touched").mkdir()  # a folder in the marker's place: it cannot be written
    run_dir.chmod(0o500)
    try:
        with client.websocket_connect("/api/runs/r1/terminal", headers=ORIGIN) as socket:
            assert "no shell was opened" in socket.receive_text()
    finally:
        run_dir.chmod(0o700)


def test_no_shell_before_the_run_is_graded(
    client: TestClient, backend: ReachingBackend, results: Path
) -> None:
    """Its agent phase may still be going: nothing of model's starts before `.graded`."""
    run_dir = graded_run(backend, results, graded=False)
    with client.websocket_connect("/api/runs/r1/terminal", headers=ORIGIN) as socket:
        said = socket.receive_text()
        with pytest.raises(WebSocketDisconnect):
            socket.receive_bytes()
    assert said == "run r1 is not graded yet; no shell was opened\r\n"
    assert touched_at(run_dir) is None


@pytest.mark.parametrize("asked", ["root", "sse-runner", "nobody"])
def test_a_shell_as_another_user_than_model_is_refused(
    client: TestClient, backend: ReachingBackend, results: Path, asked: str
) -> None:
    run_dir = graded_run(backend, results)
    address = f"/api/runs/r1/terminal?user={asked}"
    with client.websocket_connect(address, headers=ORIGIN) as socket:
        said = socket.receive_text()
    assert said == (
        f"a shell runs as model only, not as {asked!r} (root: ssebench web "
        "--allow-root-terminal); no shell was opened\r\n"
    )
    assert touched_at(run_dir) is None


def test_root_shells_open_with_allow_root_terminal(
    backend: ReachingBackend, results: Path, tmp_path: Path
) -> None:
    app = create_app(
        backend, results, tmp_path / "evals", TOKEN, node_modules(), allow_root_terminal=True
    )
    client = TestClient(app)
    client.get(f"/?token={TOKEN}", follow_redirects=False)
    graded_run(backend, results)
    with client.websocket_connect("/api/runs/r1/terminal?user=root", headers=ORIGIN) as socket:
        assert b"user=root in=task" in _read_until(socket, b"user=root")
