"""The MCP server: what test_patch runs and says, on a fake daemon, the real one, and the SDK."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from ssebench.daemon._client import Reply
from ssebench.daemon._client._api import DaemonApi, DaemonRefusedError
from ssebench.daemon._gate import Action
from ssebench.daemon._messages import BencherRequest, BencherResponse, CapabilitiesResponse
from ssebench.daemon.entrypoint._services import tcp_listening
from ssebench.daemon.mcp import TAIL_CHARS, LogStore, PatchTester
from ssebench.spec import contract

from .conftest import Running, free_port

EVERYTHING = CapabilitiesResponse(
    can_build=True, can_run_poc=True, poc_count=3, has_function_test=True, has_intent_test=True
)


class FakeAgentApi:
    """Agent-facing routes answering from a table of exit codes."""

    def __init__(
        self,
        codes: dict[str, int] | None = None,
        *,
        caps: CapabilitiesResponse = EVERYTHING,
        output: str = "",
        refuse: dict[str, int] | None = None,
    ) -> None:
        self.codes = codes or {}
        self.caps = caps
        self.output = output
        self.refuse = refuse or {}
        self.calls: list[str] = []

    def capabilities(self) -> CapabilitiesResponse:
        return self.caps

    def bencher(
        self, action: Action, request: BencherRequest, *, timeout: float | None
    ) -> BencherResponse:
        assert not request.grading
        name = action if request.poc is None else f"{action}:{request.poc}"
        self.calls.append(name)
        if name in self.refuse:
            body = b'{"error": "withheld here", "code": "withheld"}'
            raise DaemonRefusedError(name, Reply(self.refuse[name], body))
        code = self.codes.get(name, 0)
        return BencherResponse(code=code, stdout=self.output or f"{name} says hi\n", stderr="")


@pytest.fixture
def logs(tmp_path: Path) -> LogStore:
    return LogStore(tmp_path)


def test_at_difficulty_4_the_agent_is_told_nothing_may_be_checked(logs: LogStore) -> None:
    api = FakeAgentApi()
    answer = PatchTester(api, difficulty=4, logs=logs).run()
    assert answer.startswith("NOTHING CHECKED")
    assert "nothing may be checked" in answer
    assert api.calls == []


def test_at_difficulty_0_every_check_runs_in_order_and_passes(logs: LogStore) -> None:
    api = FakeAgentApi()
    answer = PatchTester(api, difficulty=0, logs=logs).run()
    assert api.calls == [
        "build",
        "run_poc:0",
        "run_poc:1",
        "run_poc:2",
        "intent_test",
        "function_test",
    ]
    assert answer.startswith("test_patch: PASSED: all 6 checks that ran passed.")
    assert "- PoC 3 of 3: PASSED" in answer


def test_at_difficulty_2_only_the_build_and_function_tests_run(logs: LogStore) -> None:
    api = FakeAgentApi()
    answer = PatchTester(api, difficulty=2, logs=logs).run()
    assert api.calls == ["build", "function_test"]
    assert "PASSED" in answer
    assert "not available at difficulty 2: intent tests, proofs of concept" in answer


def test_the_pocs_stop_at_the_first_that_still_triggers(logs: LogStore) -> None:
    api = FakeAgentApi({"run_poc:0": 1})
    answer = PatchTester(api, difficulty=1, logs=logs).run()
    assert api.calls == ["build", "run_poc:0", "function_test"]
    assert answer.startswith("test_patch: FAILED: 1 of 3 checks that ran failed.")
    assert "- PoC 1 of 3: FAILED (the bug still triggers: run.sh exited with status 1)" in answer
    assert "- PoC 2-3 of 3: NOT RUN (stopped at the first PoC that still triggers)" in answer
    assert "== PoC 1 of 3: output ==" in answer
    assert "run_poc:0 says hi" in answer


def test_a_failing_build_stops_every_other_check(logs: LogStore) -> None:
    api = FakeAgentApi({"build": 2})
    answer = PatchTester(api, difficulty=0, logs=logs).run()
    assert api.calls == ["build"]
    assert "- build: FAILED (the build failed: build.sh exited with status 2)" in answer
    assert "- function tests: NOT RUN (not run: the build did not pass)" in answer


def test_a_long_failing_log_is_cut_to_its_tail_and_saved_whole_for_the_agent(
    logs: LogStore,
) -> None:
    output = "".join(f"line {n}\n" for n in range(5000))
    api = FakeAgentApi({"function_test": 1}, output=output)
    answer = PatchTester(api, difficulty=2, logs=logs).run()
    assert "line 4999" in answer and "line 10\n" not in answer
    saved = [p for p in logs.directory.iterdir()]
    assert len(saved) == 1
    assert f"full log: {saved[0]}" in answer
    assert f"last {TAIL_CHARS} of" in answer
    assert "line 0\n" in saved[0].read_text()
    assert saved[0].stat().st_mode & 0o777 == 0o644
    assert logs.directory.stat().st_mode & 0o777 == 0o755


def test_a_check_the_daemon_refuses_is_reported_as_refused(logs: LogStore) -> None:
    api = FakeAgentApi(refuse={"build": 403})
    answer = PatchTester(api, difficulty=3, logs=logs).run()
    assert "- build: REFUSED (withheld here)" in answer
    assert answer.startswith("test_patch: NOTHING CHECKED")


def test_an_unreachable_daemon_is_described_not_raised(tmp_path: Path, logs: LogStore) -> None:
    api = DaemonApi(str(tmp_path / "nothing.sock"))
    answer = PatchTester(api, difficulty=0, logs=logs).run()
    assert answer.startswith("ERROR: test_patch could not reach the SSEBench daemon")


# -- the real daemon --------------------------------------------------------------------


@pytest.mark.process
@pytest.mark.parametrize("difficulty", [0, 2])
def test_the_real_daemon_fails_the_unmodified_tree_and_passes_the_fix(
    start_daemon: Callable[..., Running], logs: LogStore, difficulty: int
) -> None:
    running = start_daemon(difficulty=difficulty)
    tester = PatchTester(
        DaemonApi(str(running.config.agent_socket)), difficulty=difficulty, logs=logs
    )
    before = tester.run()
    (Path(running.daemon.task.source) / "lib.txt").write_text("fixed\n")
    after = tester.run()
    if difficulty == 0:
        assert before.startswith("test_patch: FAILED")
        assert "- PoC 1 of 2: FAILED" in before
        assert "triggered by POC-ONE" in before
        assert "- intent tests: FAILED" in before
        assert after.startswith("test_patch: PASSED: all 5 checks that ran passed.")
    else:
        # Build and function tests cannot tell the bug from the fix: both pass.
        assert before.startswith("test_patch: PASSED: all 2 checks that ran passed.")
        assert after.startswith("test_patch: PASSED: all 2 checks that ran passed.")
        assert "proofs of concept" in after and "POC-ONE" not in before


# -- the server, through the SDK's own client ---------------------------------------


@pytest.fixture
def mcp_server(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], str]]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(difficulty: str, agent_socket: Path) -> tuple[subprocess.Popen[bytes], str]:
        port = free_port()
        env = dict(os.environ, SSE_DIFFICULTY=difficulty, SSE_DAEMON_SOCKET=str(agent_socket))
        log = (tmp_path / f"mcp-{port}.log").open("wb")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ssebench.daemon.mcp",
                "--port",
                str(port),
                "--log-dir",
                str(tmp_path),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        return proc, f"http://127.0.0.1:{port}/mcp"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(30)


def port_of(url: str) -> int:
    """The port of a `http://host:port/path` URL."""
    return int(url.rsplit(":", 1)[1].split("/")[0])


def wait_listening(proc: subprocess.Popen[bytes], url: str, seconds: float = 60) -> None:
    """Until the server's port accepts connections (it binds before loading the SDK)."""
    port = port_of(url)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the MCP server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise AssertionError("the MCP server did not listen")


async def _call_test_patch(url: str) -> str:
    async with Client(url, read_timeout_seconds=300) as client:
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == ["test_patch"]
        assert tools.tools[0].input_schema.get("properties", {}) == {}
        result = await client.call_tool("test_patch", {})
    assert not result.is_error
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.process
def test_the_sdk_client_calls_test_patch_on_the_server(
    start_daemon: Callable[..., Running],
    mcp_server: Callable[..., tuple[subprocess.Popen[bytes], str]],
) -> None:
    running = start_daemon(difficulty=0)
    proc, url = mcp_server("0", running.config.agent_socket)
    wait_listening(proc, url)
    answer = anyio.run(_call_test_patch, url)
    assert answer.startswith("test_patch: FAILED")
    assert "- PoC 1 of 2: FAILED" in answer


def _log_of(tmp_path: Path, url: str) -> Path:
    return tmp_path / f"mcp-{port_of(url)}.log"


def _wait_listening_unseen(proc: subprocess.Popen[bytes], url: str) -> None:
    """Until the server listens, found the entrypoint's way: without connecting."""
    listening = tcp_listening("127.0.0.1", port_of(url))
    deadline = time.monotonic() + 30
    while not listening():
        assert time.monotonic() < deadline and proc.poll() is None, "the MCP server did not listen"
        time.sleep(0.02)


@pytest.mark.process
def test_the_sdk_loads_only_when_the_first_client_connects(
    tmp_path: Path,
    start_daemon: Callable[..., Running],
    mcp_server: Callable[..., tuple[subprocess.Popen[bytes], str]],
) -> None:
    running = start_daemon(difficulty=2)
    proc, url = mcp_server("2", running.config.agent_socket)
    _wait_listening_unseen(proc, url)
    time.sleep(1.0)
    log = _log_of(tmp_path, url)
    assert "listening on" in log.read_text()
    assert "first client" not in log.read_text(), "the SDK loaded with no client"
    # The SDK's pydantic brings a compiled core: mapped into the process once loaded.
    assert "pydantic_core" not in _loaded_modules(proc.pid), "the SDK is not in memory"
    answer = anyio.run(_call_test_patch, url)
    assert answer.startswith("test_patch: PASSED")
    assert "first client after" in log.read_text()
    assert "pydantic_core" in _loaded_modules(proc.pid)


def _loaded_modules(pid: int) -> set[str]:
    """Top-level packages of the files a process has mapped (its compiled modules)."""
    found = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = Path(line.split()[-1]).parts if "/" in line else ()
        if "site-packages" in parts:
            found.add(parts[parts.index("site-packages") + 1])
    return found


@pytest.mark.process
def test_sigterm_before_the_first_client_ends_the_server_with_status_0(
    tmp_path: Path, mcp_server: Callable[..., tuple[subprocess.Popen[bytes], str]]
) -> None:
    proc, url = mcp_server("2", tmp_path / "none.sock")
    _wait_listening_unseen(proc, url)
    proc.terminate()
    assert proc.wait(10) == 0


@pytest.mark.process
def test_the_server_refuses_to_start_on_an_invalid_difficulty(
    tmp_path: Path, mcp_server: Callable[..., tuple[subprocess.Popen[bytes], str]]
) -> None:
    started = time.monotonic()
    proc, _ = mcp_server("7", tmp_path / "none.sock")
    assert proc.wait(30) == 2
    assert time.monotonic() - started < 10
    logs = list(tmp_path.glob("mcp-*.log"))
    assert "SSE_DIFFICULTY='7' is not a difficulty" in logs[0].read_text()


@pytest.mark.process
@pytest.mark.parametrize(
    ("socket", "said"),
    [
        ("relative.sock", "SSE_DAEMON_SOCKET='relative.sock' must be an absolute path"),
        (contract.ADMIN_SOCKET, "SSE_DAEMON_SOCKET must not be the admin socket's path"),
    ],
)
def test_the_server_refuses_an_agent_socket_the_daemon_would_refuse(
    socket: str,
    said: str,
    tmp_path: Path,
    mcp_server: Callable[..., tuple[subprocess.Popen[bytes], str]],
) -> None:
    """One parser for SSE_DAEMON_SOCKET (`ssebench.daemon._environ`): the MCP server never
    sends the agent's calls to a socket the daemon would not have listened on."""
    proc, _ = mcp_server("2", socket)
    assert proc.wait(30) == 2
    (log,) = tmp_path.glob("mcp-*.log")
    assert f"ssebench-mcp: refusing to start: {said}" in log.read_text()
