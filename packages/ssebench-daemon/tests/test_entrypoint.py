"""The entrypoint on the host: a fake daemon and MCP server, the real evaluator, real signals.

Each run is its own process (the entrypoint installs signal handlers and
reaps children as PID 1 would). As root, the agent runs as a throw-away uid
that owns no other process on the machine, and the results are handed to
another ("the host user"); without root the tests that need either skip.

The agent's uid is this test session's alone (`agent_uid`): the entrypoint
ends every agent phase with `kill(-1, SIGKILL)` as that uid, and on the host
(no PID namespace) that reaches every process of the uid, so two sessions on
one machine sharing a fixed uid kill each other's agents (exit status 137).
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ssebench.daemon._budget import CHECK_MARGIN, GRADE_RESERVE, PREPARE_ALLOWANCE
from ssebench.daemon._users import Identity, processes_of
from ssebench.daemon.entrypoint._agent import agent_env
from ssebench.daemon.entrypoint._files import hand_over
from ssebench.daemon.entrypoint._services import tcp_listening
from ssebench.spec import Result, contract, read_json

from .conftest import free_port

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="switching users and handing files over need root")
AGENT_UIDS = range(1_540_000_000, 1_541_000_000)
"""Where the agent's uid is picked: far from the uids of accounts, images and subuid ranges."""
HOST_UID = 54330

FAKE_DAEMON = r"""
import http.server, json, os, socketserver, sys, threading
admin, agent, source, calls, mode = sys.argv[1:6]
if mode == "crash":
    print("fake daemon: SSE_DIFFICULTY='9' is not a difficulty", file=sys.stderr, flush=True)
    sys.exit(2)

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def address_string(self):
        return "unix"

    def send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def record(self, text):
        with open(calls, "a") as f:
            f.write(text + "\n")

    def do_GET(self):
        self.record("GET " + self.path)
        if self.path == "/version":
            return self.send(200, {"version": "fake"})
        if self.path == "/project":
            return self.send(200, {"id": "t", "project": "p", "language": "c", "source": source,
                                   "task_description": {}, "scripts": {}})
        if self.path == "/capabilities":
            return self.send(200, {"can_build": True, "can_run_poc": True, "poc_count": 1,
                                   "has_function_test": True, "has_intent_test": False})
        self.send(404, {"error": "no route", "code": "not_found"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.record("POST " + self.path + " " + body.decode())
        if self.path == "/admin/agent_exited":
            # As the daemon does: the backend's report goes on to the entrypoint, once.
            report = os.environ.pop("SSE_AGENT_REPORT_FD", None)
            code = json.loads(body or b"{}").get("exit_code")
            if report and code is not None:
                os.write(int(report), json.dumps({"exit_code": code}).encode() + b"\n")
                os.close(int(report))
            return self.send(200, {"success": True, "killed": 0})
        if self.path == "/prepare_grading":
            if mode == "slow-grading":
                import time
                time.sleep(600)
            return self.send(200, {"success": True, "patch_bytes": 0})
        if self.path.startswith("/tool/bencher"):
            with open(os.path.join(source, "lib.txt")) as f:
                fixed = "fixed" in f.read()
            code = 0 if fixed or "run_poc" not in self.path else 1
            err = "" if code == 0 else "boom"
            return self.send(200, {"code": code, "stdout": "", "stderr": err})
        self.send(404, {"error": "no route", "code": "not_found"})

class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

for path in (admin, agent):
    if os.path.exists(path):
        os.unlink(path)
os.makedirs(os.path.dirname(admin), exist_ok=True)
servers = [Server(admin, Handler), Server(agent, Handler)]
os.chmod(agent, 0o666)
threading.Thread(target=servers[1].serve_forever, daemon=True).start()
print("fake daemon: listening", flush=True)
servers[0].serve_forever()
"""

FAKE_MCP = r"""
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
print("fake mcp: listening", flush=True)
time.sleep(100000)
"""

LAUNCH = r"""
import json, sys
from pathlib import Path
from ssebench.daemon.entrypoint import Entrypoint, Settings
from ssebench.daemon._users import Identity
c = json.loads(sys.argv[1])
settings = Settings(
    agent_command=c["command"], timeout=c["timeout"], keep_alive=c["keep_alive"],
    results_dir=Path(c["results"]), archive_dir=Path(c["archive"]),
    admin_socket=Path(c["admin"]), agent_socket=c["agent_socket"], mcp_port=c["mcp_port"],
    model=Identity(**c["model"]), environ=c["environ"], daemon_argv=c["daemon_argv"],
    mcp_argv=c["mcp_argv"], start_timeout=c["start_timeout"], evaluator_grace=5.0,
    evaluator_timeout=c["evaluator_timeout"], evaluator_argv=c["evaluator_argv"],
    check_timeout=c["check_timeout"], agent_container=c["agent_container"],
    go_file=Path(c["go_file"]), report_grace=c["report_grace"],
)
sys.exit(Entrypoint(settings).run())
"""


def _claim_uid(candidates: range) -> tuple[int, socket.socket]:
    """A uid no process has now, claimed for as long as the returned socket stays open.

    The claim is an abstract Unix socket named after the uid: only one process
    can bind the name, and the kernel drops it when that process ends, so
    concurrent test sessions never pick the same uid and nothing is left behind.
    """
    rng = random.SystemRandom()
    for _ in range(1000):
        uid = rng.choice(candidates)
        claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            claim.bind(f"\0ssebench-test-agent-uid-{uid}")
        except OSError:
            claim.close()
            continue
        if processes_of(uid):
            claim.close()
            continue
        return uid, claim
    raise RuntimeError(f"no free uid in {candidates}")


@pytest.fixture(scope="session")
def agent_uid() -> Iterator[int]:
    """The agent's uid as root: unused by any other process, and this session's alone."""
    if not ROOT:
        yield os.geteuid()
        return
    uid, claim = _claim_uid(AGENT_UIDS)
    with claim:
        yield uid


@dataclass
class Layout:
    """A run's directories, laid out like the container's, under one temporary folder."""

    base: Path
    results: Path
    archive: Path
    source: Path
    sockets: Path
    model: Identity
    host: tuple[int, int]
    calls: Path
    mcp_port: int = field(default_factory=free_port)

    @property
    def go_file(self) -> Path:
        return self.sockets / "agent-go"

    def chown(self, path: Path, uid: int) -> None:
        if ROOT:
            os.chown(path, uid, uid)


@pytest.fixture
def layout(agent_uid: int) -> Iterator[Layout]:
    base = Path(tempfile.mkdtemp(prefix="sse-ep-", dir="/tmp"))
    base.chmod(0o755)
    results = base / "results"
    results.mkdir(mode=0o711)
    archive = results / "archive"
    archive.mkdir()
    (results / "result.json").touch()
    source = base / "src"
    source.mkdir()
    (source / "lib.txt").write_text("bug\n")
    sockets = base / "run"
    if ROOT:
        model = Identity(name="sse-test-model", uid=agent_uid, gid=agent_uid, home=str(base))
        host = (HOST_UID, HOST_UID)
        os.chown(source, agent_uid, agent_uid)
        os.chown(source / "lib.txt", agent_uid, agent_uid)
        for path in (results, archive, results / "result.json"):
            os.chown(path, *host)
    else:
        model = Identity(name="me", uid=os.geteuid(), gid=os.getegid(), home=str(base))
        host = (os.geteuid(), os.getegid())
    yield Layout(
        base=base,
        results=results,
        archive=archive,
        source=source,
        sockets=sockets,
        model=model,
        host=host,
        calls=base / "calls.txt",
    )
    if ROOT:
        subprocess.run(["pkill", "-KILL", "-U", str(agent_uid)], check=False)
    shutil.rmtree(base, ignore_errors=True)


@dataclass
class Ran:
    """A finished (or still running) entrypoint process."""

    proc: subprocess.Popen[bytes]
    layout: Layout
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""

    def result(self) -> Result:
        return read_json(self.layout.results / "result.json", Result)

    def calls(self) -> list[str]:
        return self.layout.calls.read_text().splitlines() if self.layout.calls.exists() else []


Start = Callable[..., Ran]


@pytest.fixture
def start(layout: Layout) -> Iterator[Start]:
    procs: list[subprocess.Popen[bytes]] = []
    daemon_script = layout.base / "fake_daemon.py"
    daemon_script.write_text(FAKE_DAEMON)
    mcp_script = layout.base / "fake_mcp.py"
    mcp_script.write_text(FAKE_MCP)

    def launch(
        script: str,
        *,
        timeout: float = 60,
        keep_alive: bool = False,
        daemon_mode: str = "ok",
        mcp_argv: list[str] | None = None,
        environ: dict[str, str] | None = None,
        wait: bool = True,
        code: str = LAUNCH,
        evaluator_timeout: float | None = None,
        evaluator_argv: list[str] | None = None,
        argv: list[str] | None = None,
        agent_container: bool = False,
        report_grace: float = 60.0,
    ) -> Ran:
        admin = layout.sockets / "admin.sock"
        agent_socket = str(layout.base / "sse.sock")
        script_text = textwrap.dedent(script)
        config = {
            "command": [] if agent_container else argv or ["/bin/bash", "-c", script_text],
            "agent_container": agent_container,
            "go_file": str(layout.go_file),
            "report_grace": report_grace,
            "timeout": timeout,
            "keep_alive": keep_alive,
            "results": str(layout.results),
            "archive": str(layout.archive),
            "admin": str(admin),
            "agent_socket": agent_socket,
            "mcp_port": layout.mcp_port,
            "model": vars(layout.model),
            "environ": {
                "PATH": f"/opt/ssebench/bin:{os.environ['PATH']}",
                "SSE_API_KEY": "sk-test-key",
                "SSE_BASE_URL": "http://proxy.invalid",
                "SSE_MODEL_NAME": "test-model",
                "SSE_RESULTS": str(layout.results),
                "SSE_ARCHIVE": str(layout.archive),
                "SSE_DIFFICULTY": "2",
                "SSE_KEEP_ALIVE": "0",
                "TIMEOUT": str(timeout),
                "JAVA_HOME": "/usr/lib/jvm/x",
                "PYTHONPATH": "/opt/ssebench/lib",
                **(environ or {}),
            },
            "daemon_argv": [
                sys.executable,
                str(daemon_script),
                str(admin),
                agent_socket,
                str(layout.source),
                str(layout.calls),
                daemon_mode,
            ],
            "mcp_argv": mcp_argv or [sys.executable, str(mcp_script), str(layout.mcp_port)],
            "start_timeout": 30.0,
            "evaluator_timeout": evaluator_timeout,
            "check_timeout": float((environ or {}).get("SSE_CHECK_TIMEOUT", 1800)),
            "evaluator_argv": evaluator_argv or [],
        }
        proc = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        procs.append(proc)
        ran = Ran(proc=proc, layout=layout)
        if wait:
            finish(ran)
        return ran

    yield launch
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def finish(ran: Ran, timeout: float = 120) -> Ran:
    started = time.monotonic()
    out, err = ran.proc.communicate(timeout=timeout)
    ran.seconds = time.monotonic() - started
    ran.stdout, ran.stderr = out.decode(errors="replace"), err.decode(errors="replace")
    return ran


def wait_for(predicate: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


# -- whole runs -----------------------------------------------------------------------


@pytest.mark.process
def test_an_agent_that_does_nothing_is_graded_and_its_exit_status_is_the_containers(
    start: Start, layout: Layout
) -> None:
    ran = start(
        """
        echo "agent says hello"
        id -u > "$SSE_ARCHIVE/uid"
        pwd > "$SSE_ARCHIVE/cwd"
        env > "$SSE_ARCHIVE/env"
        read -t 1 line; echo "stdin: $?" > "$SSE_ARCHIVE/stdin"
        exit 3
        """
    )
    assert ran.proc.returncode == 3, ran.stderr
    assert "agent says hello" in ran.stdout
    assert "agent says hello" in (layout.results / "agent.log").read_text()
    result = ran.result()
    assert result.patch_result.status == "failed"
    assert result.patch_result.pov_passed == 0 and result.patch_result.pov_total == 1
    assert result.runtime_result.agent_exit_code == 3
    assert not result.runtime_result.agent_timeout
    assert (layout.results / ".graded").read_text() == "failed\n"
    assert (layout.archive / "uid").read_text().strip() == str(layout.model.uid)
    assert (layout.archive / "cwd").read_text().strip() == str(layout.source)
    assert (layout.archive / "stdin").read_text().strip() != "0", "stdin must be closed"
    env = dict(
        line.split("=", 1)
        for line in (layout.archive / "env").read_text().splitlines()
        if "=" in line
    )
    assert env["SSE_API_KEY"] == "sk-test-key"
    assert env["SSE_DAEMON_SOCKET"] == str(layout.base / "sse.sock")
    assert env["HOME"] == layout.model.home and env["USER"] == layout.model.name
    assert env["JAVA_HOME"] == "/usr/lib/jvm/x"
    assert "/opt/ssebench" not in env["PATH"]
    for hidden in ("SSE_RESULTS", "SSE_KEEP_ALIVE", "PYTHONPATH"):
        assert hidden not in env
    assert not any("admin.sock" in value for value in env.values())
    calls = ran.calls()
    assert calls.index("POST /admin/agent_exited {}") < calls.index("POST /prepare_grading {}")
    # The entrypoint asks for grading to be prepared as the evaluator starts, before
    # the evaluator's first request; the evaluator asks again (the same answer). The
    # first GET /capabilities is the entrypoint's own, sizing the evaluator's budget.
    assert calls.count("POST /prepare_grading {}") == 2
    assert calls.count("GET /capabilities") == 2
    evaluators_first = max(i for i, call in enumerate(calls) if call == "GET /capabilities")
    assert calls.index("POST /prepare_grading {}") < evaluators_first


@pytest.mark.process
def test_an_agent_that_applies_the_fix_passes(start: Start, layout: Layout) -> None:
    ran = start("echo fixed > lib.txt")
    assert ran.proc.returncode == 0, ran.stderr
    assert ran.result().patch_result.status == "passed"
    assert "daemon ready after" in ran.stderr
    assert "MCP server listening after" in ran.stderr


@pytest.mark.process
def test_an_agent_past_its_time_limit_is_killed_with_124_and_graded_anyway(
    start: Start, layout: Layout
) -> None:
    ran = start("echo started; sleep 600", timeout=2)
    assert ran.proc.returncode == 124, ran.stderr
    assert ran.seconds < 30
    result = ran.result()
    assert result.runtime_result.agent_timeout is True
    assert result.runtime_result.agent_exit_code == 124
    assert 1.5 < (result.runtime_result.agent_duration or 0) < 10
    assert result.patch_result.status == "failed"
    assert (layout.results / ".graded").exists()


@pytest.mark.process
@needs_root
def test_nothing_the_agent_left_running_survives_the_agent_phase(
    start: Start, layout: Layout
) -> None:
    ran = start(
        """
        sleep 1000 &
        setsid sleep 1001 &
        (setsid bash -c 'trap "" TERM HUP; sleep 1002' &) &
        nohup sleep 1003 >/dev/null 2>&1 &
        sleep 0.3
        exit 0
        """
    )
    assert ran.proc.returncode == 0, ran.stderr
    assert processes_of(layout.model.uid) == []
    assert ran.result().patch_result.status == "failed"


SURVIVING_EVALUATOR = r"""
import os, sys, time
from pathlib import Path
from ssebench.daemon.evaluator import write_result
from ssebench.spec import PatchResult, Result, RuntimeResult
results, spot, uid = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
if os.fork() == 0:
    # What a lazy fetch or a hook started as `model` during grading would be: its own
    # session, double-forked, watching for the marker.
    os.setsid()
    if os.fork():
        os._exit(0)
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
    (spot / "started").touch()
    while True:
        if (results / ".graded").exists():
            (spot / "saw-the-marker").touch()
            time.sleep(1000)
        time.sleep(0.002)
while not (spot / "started").exists():
    time.sleep(0.01)
write_result(results, Result(patch_result=PatchResult(status="failed"),
                             runtime_result=RuntimeResult()))
"""


@pytest.mark.process
@needs_root
def test_a_model_process_started_during_grading_is_dead_before_the_marker(
    start: Start, layout: Layout
) -> None:
    spot = layout.base / "survivor"
    spot.mkdir()
    layout.chown(spot, layout.model.uid)
    script = layout.base / "evaluator.py"
    script.write_text(SURVIVING_EVALUATOR)
    ran = start(
        "exit 0",
        evaluator_argv=[
            sys.executable, str(script), str(layout.results), str(spot), str(layout.model.uid),
        ],
    )  # fmt: skip
    assert ran.proc.returncode == 0, ran.stderr
    assert (spot / "started").exists(), ran.stderr
    assert (layout.results / ".graded").read_text() == "failed\n"
    time.sleep(0.5)  # a survivor would have seen the marker by now
    assert not (spot / "saw-the-marker").exists()
    assert processes_of(layout.model.uid) == []
    assert "killed 1 process(es) of sse-test-model found after grading" in ran.stderr


@pytest.mark.process
def test_a_stop_signal_in_the_agent_phase_exits_143_with_an_error_grade(
    start: Start, layout: Layout
) -> None:
    ran = start("echo running; sleep 600", wait=False)
    wait_for(lambda: "running" in _read(layout.results / "agent.log"))
    stopped = time.monotonic()
    os.kill(ran.proc.pid, signal.SIGTERM)
    finish(ran)
    assert ran.proc.returncode == 143, ran.stderr
    assert time.monotonic() - stopped < 20
    result = ran.result()
    assert result.patch_result.status == "error"
    assert result.patch_result.error_msg == "the run was stopped by SIGTERM during the agent phase"
    assert (layout.results / ".graded").read_text() == "error\n"
    if ROOT:
        assert processes_of(layout.model.uid) == []


@pytest.mark.process
def test_a_stop_signal_while_grading_exits_143_with_an_error_grade(
    start: Start, layout: Layout
) -> None:
    ran = start("true", daemon_mode="slow-grading", wait=False)
    wait_for(lambda: "POST /prepare_grading {}" in _read(layout.calls))
    os.kill(ran.proc.pid, signal.SIGTERM)
    finish(ran, timeout=20)
    assert ran.proc.returncode == 143
    result = ran.result()
    assert result.patch_result.status == "error"
    assert "during the grading phase" in (result.patch_result.error_msg or "")
    assert result.runtime_result.agent_exit_code == 0


@pytest.mark.process
def test_an_agent_command_that_cannot_start_exits_127_and_is_graded(
    start: Start, layout: Layout
) -> None:
    ran = start("", argv=["/nonexistent/agent", "--flag"])
    assert ran.proc.returncode == 127, ran.stderr
    assert "cannot start the agent command '/nonexistent/agent'" in ran.stdout
    assert "cannot start the agent command" in _read(layout.results / "agent.log")
    result = ran.result()
    assert result.runtime_result.agent_exit_code == 127
    assert result.patch_result.status == "failed"
    assert (layout.results / ".graded").exists()


@pytest.mark.process
def test_the_evaluators_budget_holds_every_check_at_its_full_limit_whatever_the_agents(
    start: Start, layout: Layout
) -> None:
    ran = start("true", timeout=1, environ={"SSE_CHECK_TIMEOUT": "40"})
    assert ran.proc.returncode == 0, ran.stderr
    # The fake task has a build, one PoC and function tests: prepare_grading's
    # allowance, three checks at 40 s with the daemon's margin each, the reserve.
    budget = PREPARE_ALLOWANCE + 3 * (40 + CHECK_MARGIN) + GRADE_RESERVE
    assert f", time limit {budget:g} s" in ran.stderr
    evaluator_log = _read(layout.results / "evaluator.log")
    assert f"budget {budget:g} s, each check at most 40 s" in evaluator_log
    # Each check is sent with its limit: all of it, since the budget holds them all.
    sent = [json.loads(call.split(" ", 2)[2]) for call in ran.calls() if "/tool/bencher" in call]
    assert len(sent) == 3
    assert all(body["timeout"] == 40 and body["grading"] is True for body in sent), sent
    assert ran.result().patch_result.status == "failed"


@pytest.mark.process
def test_grading_that_outlasts_the_evaluators_limit_is_an_evaluator_timeout(
    start: Start, layout: Layout
) -> None:
    ran = start("true", timeout=2, daemon_mode="slow-grading", evaluator_timeout=2)
    assert ran.proc.returncode == 0, ran.stderr
    assert ran.seconds < 60
    result = ran.result()
    assert result.patch_result.status == "error"
    assert "time limit (2 s) ran out" in (result.patch_result.error_msg or "")
    assert result.runtime_result.evaluator_timeout is True
    assert result.runtime_result.agent_exit_code == 0
    assert (layout.results / ".graded").read_text() == "error\n"


@pytest.mark.process
def test_an_evaluator_that_hangs_is_killed_after_its_grace_with_an_error_grade(
    start: Start, layout: Layout
) -> None:
    ran = start(
        "true",
        timeout=1,
        evaluator_timeout=1,
        evaluator_argv=[sys.executable, "-c", "import time; time.sleep(600)"],
    )
    assert ran.proc.returncode == 0, ran.stderr
    assert 5 < ran.seconds < 60
    result = ran.result()
    assert result.patch_result.status == "error"
    assert result.patch_result.error_msg == (
        "the evaluator did not finish within 1 s (+5 s): killed"
    )
    assert result.runtime_result.evaluator_timeout is True
    assert (layout.results / ".graded").read_text() == "error\n"


@pytest.mark.process
def test_a_daemon_that_does_not_start_ends_the_run_promptly_with_its_log(
    start: Start, layout: Layout
) -> None:
    ran = start("echo never > $SSE_ARCHIVE/ran", daemon_mode="crash")
    assert ran.proc.returncode == 2
    assert ran.seconds < 15
    assert not (layout.archive / "ran").exists()
    result = ran.result()
    assert result.patch_result.status == "error"
    assert (result.patch_result.error_msg or "").startswith("the daemon exited with status 2")
    assert "is not a difficulty" in (result.patch_result.error_log or "")
    assert "is not a difficulty" in ran.stderr
    assert (layout.results / ".graded").exists()


@pytest.mark.process
def test_an_mcp_server_refusing_a_bad_difficulty_ends_the_run_with_a_clear_error(
    start: Start, layout: Layout
) -> None:
    mcp = [sys.executable, "-m", "ssebench.daemon.mcp", "--port", str(layout.mcp_port)]
    ran = start("true", mcp_argv=mcp, environ={"SSE_DIFFICULTY": "high"})
    assert ran.proc.returncode == 2
    result = ran.result()
    assert result.patch_result.status == "error"
    assert "the MCP server exited with status 2" in (result.patch_result.error_msg or "")
    assert "SSE_DIFFICULTY='high' is not a difficulty" in (result.patch_result.error_log or "")


@pytest.mark.process
def test_an_mcp_server_that_dies_after_binding_is_reported_during_the_agent_phase(
    start: Start, layout: Layout
) -> None:
    dying = (
        "import socket, sys, time\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {layout.mcp_port}))\n"
        "s.listen(16)\n"
        "time.sleep(0.5)\n"
        "print('fake mcp: the SDK failed to load', flush=True)\n"
        "sys.exit(3)\n"
    )
    ran = start("sleep 3", mcp_argv=[sys.executable, "-c", dying])
    assert ran.proc.returncode == 0, ran.stderr
    assert "MCP server listening after" in ran.stderr
    assert "the MCP server exited during the agent phase (status 3); see mcp.log" in ran.stderr
    assert "the SDK failed to load" in (layout.results / "mcp.log").read_text()


def _mcp_noting_sigterm(port: int, note: Path) -> list[str]:
    """An MCP stand-in that listens and, on SIGTERM, writes `note` and exits."""
    script = (
        "import pathlib, signal, socket, sys, time\n"
        "def stop(*_):\n"
        f"    pathlib.Path({str(note)!r}).write_text('SIGTERM')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {port}))\n"
        "s.listen(16)\n"
        "while True: time.sleep(1)\n"
    )
    return [sys.executable, "-c", script]


@pytest.mark.process
def test_after_grading_the_services_are_killed_without_a_graceful_stop(
    start: Start, layout: Layout
) -> None:
    note = layout.base / "mcp-got-sigterm"
    ran = start("true", mcp_argv=_mcp_noting_sigterm(layout.mcp_port, note))
    assert ran.proc.returncode == 0, ran.stderr
    assert (layout.results / ".graded").exists()
    assert not note.exists(), "the MCP server was asked to stop instead of being killed"


@pytest.mark.process
def test_a_stopped_run_still_stops_its_services_gracefully(start: Start, layout: Layout) -> None:
    note = layout.base / "mcp-got-sigterm"
    ran = start(
        "echo running; sleep 600",
        wait=False,
        mcp_argv=_mcp_noting_sigterm(layout.mcp_port, note),
    )
    wait_for(lambda: "running" in _read(layout.results / "agent.log"))
    os.kill(ran.proc.pid, signal.SIGTERM)
    finish(ran)
    assert ran.proc.returncode == 143, ran.stderr
    assert note.read_text() == "SIGTERM"


@pytest.mark.process
def test_keep_alive_writes_the_marker_and_stays_up_until_stopped(
    start: Start, layout: Layout
) -> None:
    ran = start("true", keep_alive=True, wait=False)
    wait_for(lambda: (layout.results / ".graded").exists(), 60)
    time.sleep(0.5)
    assert ran.proc.poll() is None
    assert ran.result().patch_result.status == "failed"
    os.kill(ran.proc.pid, signal.SIGTERM)
    finish(ran, timeout=20)
    assert ran.proc.returncode == 143


@pytest.mark.process
@needs_root
def test_planted_links_in_the_archive_are_never_followed_when_handing_files_over(
    start: Start, layout: Layout
) -> None:
    victim = layout.base / "passwd"
    victim.write_text("root:x:0:0::/root:/bin/bash\n")
    victim.chmod(0o644)
    before = victim.stat()
    ran = start(
        f"""
        ln -s {victim} "$SSE_ARCHIVE/passwd-link"
        ln -s {layout.results}/result.json "$SSE_ARCHIVE/result-link"
        ln -s /etc "$SSE_ARCHIVE/etc-link"
        mkdir "$SSE_ARCHIVE/dialog" && echo '{{}}' > "$SSE_ARCHIVE/dialog/dialog.jsonl"
        """
    )
    assert ran.proc.returncode == 0, ran.stderr
    after = victim.stat()
    assert victim.read_text() == "root:x:0:0::/root:/bin/bash\n"
    assert (after.st_uid, after.st_gid, after.st_mode) == (
        before.st_uid,
        before.st_gid,
        before.st_mode,
    )
    assert ran.result().patch_result.status == "failed", (
        "result.json was not written through a link"
    )
    for name in ("passwd-link", "result-link", "etc-link"):
        assert not os.path.lexists(layout.archive / name), f"{name} reached the host"
    for name in ("dialog", "dialog/dialog.jsonl"):
        info = os.lstat(layout.archive / name)
        assert (info.st_uid, info.st_gid) == layout.host, name
    log = (layout.results / "entrypoint.log").read_text()
    assert f"passwd-link (a link to {victim})" in log
    assert "etc-link (a link to /etc)" in log
    assert Path("/etc").stat().st_uid == 0
    for name in ("result.json", "agent.log", "daemon.log", "evaluator.log", ".graded"):
        assert (layout.results / name).stat().st_uid == layout.host[0], name


@pytest.mark.process
@needs_root
def test_what_the_agent_leaves_in_the_archive_reaches_the_host_without_special_bits(
    start: Start, layout: Layout
) -> None:
    ran = start(
        """
        cd "$SSE_ARCHIVE"
        cp /bin/true suid && chmod 6755 suid
        mkdir shared && chmod 1777 shared
        echo hi > shared/world && chmod 666 shared/world
        mkfifo fifo
        ln suid suid-again
        """
    )
    assert ran.proc.returncode == 0, ran.stderr
    # Of two names for one file, the first met is removed; the other is then the file's only.
    names = sorted(path.name for path in layout.archive.iterdir())
    assert names in (["shared", "suid"], ["shared", "suid-again"])
    kept = layout.archive / names[1]
    for path in (layout.archive, layout.archive / "shared", layout.archive / "shared" / "world"):
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == layout.host, path
        assert not info.st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | 0o022), path
    info = kept.lstat()
    assert (info.st_uid, info.st_nlink, stat.S_IMODE(info.st_mode)) == (layout.host[0], 1, 0o755)
    log = (layout.results / "entrypoint.log").read_text()
    assert "fifo (a FIFO)" in log and " (a hard link (2 names))" in log


@pytest.mark.process
def test_the_agents_output_is_capped_in_its_log_and_the_containers_output_with_a_marker(
    start: Start, layout: Layout
) -> None:
    limit = contract.AGENT_OUTPUT_LIMIT
    extra = 3 * 1024 * 1024 + 5
    ran = start(
        f"""
        head -c {limit + extra} /dev/zero | tr '\\0' x
        echo "still running after its output was capped" > "$SSE_ARCHIVE/after"
        """
    )
    assert ran.proc.returncode == 0, ran.stderr
    # The agent was never blocked: it went on after printing past the limit.
    assert (layout.archive / "after").read_text().startswith("still running")
    marker = "\n" + contract.output_cap_line(limit, extra)
    log = (layout.results / "agent.log").read_text()
    assert log == "x" * limit + marker
    assert ran.stdout == log
    assert ran.stdout.count(contract.OUTPUT_CAP_MARKER) == 1


@pytest.mark.process
def test_the_evaluators_relayed_output_is_capped_too(start: Start, layout: Layout) -> None:
    limit = contract.AGENT_OUTPUT_LIMIT
    chatty = f"import sys; sys.stdout.write('e' * {limit + 100}); sys.stdout.write('\\n')"
    ran = start("true", evaluator_argv=[sys.executable, "-c", chatty])
    log = (layout.results / "evaluator.log").read_text()
    assert log == "e" * limit + "\n" + contract.output_cap_line(limit, 101)
    assert ran.stderr.count("e" * 1000) == limit // 1000
    assert ran.stderr.count(contract.OUTPUT_CAP_MARKER) == 1
    assert ran.result().patch_result.status == "error", "it left no grade"


@pytest.mark.process
def test_a_missing_agent_command_is_refused_with_an_error_grade(layout: Layout) -> None:
    env = dict(os.environ, SSE_RESULTS=str(layout.results))
    proc = subprocess.run(
        [sys.executable, "-m", "ssebench.daemon.entrypoint"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert b"no agent command" in proc.stderr
    result = read_json(layout.results / "result.json", Result)
    assert result.patch_result.status == "error"
    assert "no agent command" in (result.patch_result.error_msg or "")


# -- the checker of a pair: the agent in a container of its own -----------------------


def _report(layout: Layout, body: dict[str, object]) -> None:
    """What the backend's `ssebench.daemon.report` sends, on the admin socket."""
    from ssebench.daemon._client import UnixHTTPClient

    reply = UnixHTTPClient(str(layout.sockets / "admin.sock")).post(
        "/admin/agent_exited", json.dumps(body).encode(), timeout=10
    )
    assert reply.ok, reply.error_text()


@pytest.mark.process
def test_a_checker_lets_the_agent_start_and_grades_on_the_backends_report(
    start: Start, layout: Layout
) -> None:
    ran = start("", agent_container=True, wait=False)
    wait_for(layout.go_file.exists)
    time.sleep(0.5)
    assert ran.proc.poll() is None, "the checker must wait for the report"
    assert not (layout.results / ".graded").exists()
    _report(layout, {"exit_code": 7})
    finish(ran)
    assert ran.proc.returncode == 7, ran.stderr
    result = ran.result()
    assert result.runtime_result.agent_exit_code == 7
    assert not result.runtime_result.agent_timeout
    assert result.patch_result.status == "failed"
    assert (layout.results / ".graded").read_text() == "failed\n"
    assert "reported exit status 7" in ran.stderr
    # The entrypoint runs no agent: no agent.log of its own (the backend writes it).
    assert not (layout.results / "agent.log").exists()
    calls = ran.calls()
    assert calls.index('POST /admin/agent_exited {"exit_code": 7}') < calls.index(
        "POST /prepare_grading {}"
    )


@pytest.mark.process
def test_a_report_of_124_is_the_agents_time_limit(start: Start, layout: Layout) -> None:
    ran = start("", agent_container=True, wait=False)
    wait_for(layout.go_file.exists)
    _report(layout, {"exit_code": 124})
    finish(ran)
    assert ran.proc.returncode == 124, ran.stderr
    assert ran.result().runtime_result.agent_timeout


@pytest.mark.process
def test_without_a_report_the_checker_ends_the_agent_phase_after_timeout_and_grace(
    start: Start, layout: Layout
) -> None:
    ran = start("", agent_container=True, timeout=1, report_grace=1.0)
    assert ran.proc.returncode == 124, ran.stderr
    assert "no report of the agent's end within 1 s (+1 s)" in ran.stderr
    result = ran.result()
    assert result.runtime_result.agent_timeout
    assert result.patch_result.status == "failed"


@pytest.mark.process
def test_a_stop_signal_while_the_checker_waits_exits_143(start: Start, layout: Layout) -> None:
    ran = start("", agent_container=True, wait=False)
    wait_for(layout.go_file.exists)
    ran.proc.send_signal(signal.SIGTERM)
    finish(ran)
    assert ran.proc.returncode == 143, ran.stderr
    assert ran.result().runtime_result.stopped_by == "SIGTERM"


# -- pieces -------------------------------------------------------------------------


def test_the_agents_environment_is_built_from_scratch() -> None:
    model = Identity(name="model", uid=1000, gid=1000, home="/home/model")
    env = agent_env(
        {
            "PATH": "/opt/ssebench/bin:/usr/local/go/bin:/usr/bin",
            "HOME": "/root",
            "SSE_API_KEY": "k",
            "SSE_BASE_URL": "u",
            "SSE_MODEL_NAME": "m",
            "SSE_ARCHIVE": "/tmp/sse-archive",
            "SSE_RESULTS": "/var/lib/ssebench/results",
            "SSE_DIFFICULTY": "1",
            "SSE_KEEP_ALIVE": "1",
            "SSEBENCH_REGISTRY": "r",
            "TIMEOUT": "60",
            "GOPATH": "/go",
            "LD_PRELOAD": "/evil.so",
            "PYTHONHOME": "/opt/ssebench",
            "SOCKET": "/run/ssebench/admin.sock",
            "https_proxy": "http://proxy:3128",
        },
        model,
        "/tmp/sse.sock",
    )
    assert env == {
        "PATH": "/usr/local/go/bin:/usr/bin",
        "HOME": "/home/model",
        "USER": "model",
        "LOGNAME": "model",
        "SHELL": env["SHELL"],
        "SSE_API_KEY": "k",
        "SSE_BASE_URL": "u",
        "SSE_MODEL_NAME": "m",
        "SSE_ARCHIVE": "/tmp/sse-archive",
        "SSE_DIFFICULTY": "1",
        "SSE_DAEMON_SOCKET": "/tmp/sse.sock",
        "TIMEOUT": "60",
        "GOPATH": "/go",
        "https_proxy": "http://proxy:3128",
    }


@needs_root
def test_handing_over_removes_links_special_files_and_hard_links_and_nothing_outside(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.write_text("keep\n")
    outside.chmod(0o4755)
    tree = tmp_path / "results"
    (tree / "archive" / "deep").mkdir(parents=True)
    (tree / "result.json").write_text("{}")
    (tree / "archive" / "deep" / "file").write_text("x")
    (tree / "archive" / "link").symlink_to(outside)
    (tree / "archive" / "dirlink").symlink_to(tmp_path)
    (tree / "archive" / "result-link").symlink_to("../result.json")
    os.link(outside, tree / "archive" / "hard")
    os.mkfifo(tree / "archive" / "fifo")
    os.mknod(tree / "archive" / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(tree / "archive" / "sock"))
    done = hand_over(tree, HOST_UID, HOST_UID)
    assert sorted(done.removed) == [
        "archive/dirlink (a link to " + str(tmp_path) + ")",
        "archive/fifo (a FIFO)",
        "archive/hard (a hard link (2 names))",
        "archive/link (a link to " + str(outside) + ")",
        "archive/null (a device)",
        "archive/result-link (a link to ../result.json)",
        "archive/sock (a socket)",
    ]
    assert done.removed_count == 7 and done.skipped == []
    assert sorted(path.name for path in (tree / "archive").iterdir()) == ["deep"]
    info = outside.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode), info.st_nlink) == (0, 0o4755, 1)
    assert tmp_path.stat().st_uid == 0
    for name in ("result.json", "archive", "archive/deep", "archive/deep/file"):
        assert os.lstat(tree / name).st_uid == HOST_UID, name


@needs_root
def test_handing_over_strips_setuid_setgid_sticky_and_shared_write_bits(tmp_path: Path) -> None:
    tree = tmp_path / "archive"
    tree.mkdir()
    modes = {
        "suid": 0o4755,
        "sgid": 0o2755,
        "both": 0o6777,
        "world": 0o666,
        "group": 0o664,
        "plain": 0o644,
        "private": 0o600,
    }
    for name, mode in modes.items():
        (tree / name).write_text(name)
        os.chown(tree / name, 1000, 1000)
        (tree / name).chmod(mode)
    (tree / "tmp").mkdir()
    (tree / "tmp").chmod(0o1777)
    (tree / "setgid-dir").mkdir()
    (tree / "setgid-dir").chmod(0o2775)
    tree.chmod(0o777)
    done = hand_over(tree, HOST_UID, HOST_UID, include_self=True)
    assert done.removed == [] and done.skipped == []
    found = {
        path.name: (path.stat().st_uid, path.stat().st_gid, oct(stat.S_IMODE(path.stat().st_mode)))
        for path in [tree, *tree.iterdir()]
    }
    host = (HOST_UID, HOST_UID)
    assert found == {
        "archive": (*host, "0o755"),
        "suid": (*host, "0o755"),
        "sgid": (*host, "0o755"),
        "both": (*host, "0o755"),
        "world": (*host, "0o644"),
        "group": (*host, "0o644"),
        "plain": (*host, "0o644"),
        "private": (*host, "0o600"),
        "tmp": (*host, "0o755"),
        "setgid-dir": (*host, "0o755"),
    }


@needs_root
def test_an_archive_root_closed_to_everyone_is_still_given_to_the_host_owner(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "archive"
    (tree / "dialog").mkdir(parents=True)
    (tree / "dialog" / "dialog.jsonl").write_text("{}\n")
    tree.chmod(0o700)  # root-owned and closed, as at the end of the agent phase
    hand_over(tree, HOST_UID, HOST_UID, include_self=True)
    for path in (tree, tree / "dialog", tree / "dialog" / "dialog.jsonl"):
        assert path.stat().st_uid == HOST_UID, path
    assert stat.S_IMODE(tree.stat().st_mode) == 0o700


def _remove_deep(top: Path) -> None:
    """Remove a tree too deep for shutil.rmtree (pytest's clean-up), one descriptor at a time."""
    names: list[str] = []
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        while True:
            folder = None
            for name in [entry.name for entry in os.scandir(fd)]:
                if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    folder = name
                    break
                os.unlink(name, dir_fd=fd)
            if folder is not None:
                child = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(folder)
                continue
            if not names:
                return
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)


@pytest.fixture
def deep_tree(tmp_path: Path) -> Iterator[Path]:
    """An empty folder for a deep tree, removed afterwards whatever the test left in it."""
    tree = tmp_path / "archive"
    tree.mkdir()
    yield tree
    _remove_deep(tree)


@needs_root
def test_handing_over_tames_a_tree_of_any_depth_with_one_descriptor(deep_tree: Path) -> None:
    depth = 1500  # deeper than Python's recursion limit and than PATH_MAX allows as one path
    fd = os.open(deep_tree, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.symlink("/etc/shadow", "link", dir_fd=fd)
    leaf = os.open("suid", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.fchmod(leaf, 0o4777)
    os.close(leaf)
    os.close(fd)
    # A walk holding a descriptor per level would need 1500: with room for a few
    # dozen it fails with EMFILE. (Counting /proc/self/fd is not a test here: other
    # threads of the test process open and close descriptors meanwhile.)
    highest = max(int(entry.name) for entry in Path("/proc/self/fd").iterdir())
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 64, hard))
    try:
        done = hand_over(deep_tree, HOST_UID, HOST_UID)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert done.removed_count == 1
    assert done.removed[0].startswith("[...]d/d/")
    assert done.removed[0].endswith("/d/link (a link to /etc/shadow)")
    fd = os.open(deep_tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
            assert os.fstat(fd).st_uid == HOST_UID
        assert [entry.name for entry in os.scandir(fd)] == ["suid"]
        leaf_info = os.stat("suid", dir_fd=fd)
        assert (leaf_info.st_uid, stat.S_IMODE(leaf_info.st_mode)) == (HOST_UID, 0o755)
    finally:
        os.close(fd)


@pytest.mark.process
def test_a_crash_of_the_entrypoint_still_leaves_an_error_grade_and_the_marker(
    start: Start, layout: Layout
) -> None:
    broken = LAUNCH.replace(
        "sys.exit(Entrypoint(settings).run())",
        "def boom(self):\n"
        "    raise RuntimeError('a bug')\n"
        "Entrypoint._end_agent_phase = boom\n"
        "sys.exit(Entrypoint(settings).run())",
    )
    ran = start("echo working", code=broken)
    assert ran.proc.returncode == 1, ran.stderr
    patch = ran.result().patch_result
    assert patch.status == "error"
    assert patch.error_msg == "the entrypoint crashed in the agent phase: RuntimeError: a bug"
    assert "Traceback" in (patch.error_log or "")
    assert (layout.results / ".graded").read_text() == "error\n"
    assert "crashed in the agent phase" in ran.stderr


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_the_listening_probe_sees_a_listening_socket_without_connecting(host: str) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        server = socket.socket(family, socket.SOCK_STREAM)
        server.bind((host, 0))
    except OSError:
        pytest.skip(f"{host} is not configured on this machine")
    with server:
        port = server.getsockname()[1]
        probe = tcp_listening(host, port)
        assert not probe(), "bound but not listening"
        server.listen(1)
        assert probe()
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing connected: the probe only read the kernel's table
    assert not tcp_listening(host, port)()
