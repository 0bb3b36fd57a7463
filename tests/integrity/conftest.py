"""The integrity suite's shared parts (docs/integrity.md).

Every test here runs real containers through `ssebench run`, with hostile test
agents from `agents/` (each a folder like any agent's: agent.yaml, Dockerfile,
agent.py; the suite copies `agents/_shared/` into each before the runs, so they
share one small client library). An agent writes what it found into
`$SSE_ARCHIVE` (the host's `archive/`); code the agent plants in the project
runs as `sse-runner` inside checks and prints `INTEG-HOOK {json}` lines, which
land in the run's check logs. The tests then judge those findings on the host.

Every test runs in both modes (`runs` is parametrised over `MODES`): in sidecar
mode the agent runs in a container of its own, with its own root services, `/tmp`
and archive to attack, and reaches the project only through the shared source
volume and the daemon in the task container.

Also here: what each task hides (`Hidden`, to recognise a leak in anything the
agent could carry out), and an internet stand-in: a server in a network
namespace of the test's own, reached through the host's routing, so nothing
leaves this machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import pytest

from ssebench.spec import labels

HERE = Path(__file__).resolve().parent
HOME = HERE.parents[1]
AGENT_SOURCES = HERE / "agents"
SHARED = AGENT_SOURCES / "_shared"
OWN_DATASET = HERE / "datasets"
DEMO = HOME / "datasets" / "demo"
TLVKIT = "tlvkit-heap-overflow"
PYARCHIVE = "pyarchive-path-traversal"
DEMO_TASKS = (TLVKIT, PYARCHIVE)

CLI_TIMEOUT = 1200.0
"""Seconds one `ssebench run` may take before the test gives up on it."""

HOOK_PREFIX = "INTEG-HOOK "
"""How the lines start that code planted in the project prints from inside a check."""

MODES = ("sandbox", "sidecar")
"""`ssebench run --mode`: every test of the suite runs in each."""

REGISTRY_PLACEHOLDER = "@SSEBENCH_REGISTRY@"
"""Replaced in agents' Dockerfiles by the image registry in force (an image they name)."""


def ssebench_argv() -> list[str]:
    """The installed `ssebench` command of this environment."""
    script = Path(sys.executable).with_name("ssebench")
    return [str(script if script.exists() else shutil.which("ssebench") or "ssebench")]


# -- the runs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HookLine:
    """One `INTEG-HOOK` line: which log it is in and what the planted code reported."""

    log: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Finished:
    """A finished `ssebench run`: exit status, output (stderr as bytes), run directory."""

    returncode: int
    stdout: str
    stderr: bytes
    run_dir: Path
    run_id: str
    seconds: float

    @property
    def archive(self) -> Path:
        return self.run_dir / "archive"

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / "summary.json").read_text())
        return data

    def grade(self) -> dict[str, Any]:
        """`patch_result` of the summary."""
        result: dict[str, Any] = self.summary()["patch_result"]
        return result

    def report(self, name: str = "report.json") -> dict[str, Any]:
        """What the agent wrote into its archive."""
        path = self.archive / name
        assert path.is_file() and not path.is_symlink(), f"the agent left no {name}\n{self.why()}"
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    def log(self, name: str) -> str:
        path = self.run_dir / name
        return path.read_text(errors="replace") if path.is_file() else ""

    def hook_lines(self) -> list[HookLine]:
        """Every `INTEG-HOOK` line printed inside a check, in the order of the check logs."""
        found = []
        for path in sorted(self.run_dir.glob("*.log")):
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith(HOOK_PREFIX):
                    found.append(HookLine(path.name, json.loads(line.removeprefix(HOOK_PREFIX))))
        return found

    def why(self) -> str:
        """The end of the run's own account of itself, for assertion messages."""
        tail = self.stderr[-3000:].decode(errors="replace")
        return (
            f"run {self.run_id} (exit {self.returncode}, {self.seconds:.0f} s) in {self.run_dir}\n"
            f"--- agent.log (end) ---\n{self.log('agent.log')[-2000:]}\n"
            f"--- stderr (end) ---\n{tail}"
        )


@dataclass
class Started:
    """A `ssebench run` still going (see `Runs.start`)."""

    argv: list[str]
    process: subprocess.Popen[bytes]
    run_dir: Path
    run_id: str
    started: float
    result: Finished | None = None

    def finish(self, timeout: float = CLI_TIMEOUT) -> Finished:
        """Wait for the CLI to end; its output is read as it comes (no pipe fills up)."""
        if self.result is None:
            try:
                out, err = self.process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                out, err = self.process.communicate()
                raise AssertionError(
                    f"`{' '.join(self.argv)}` did not finish in {timeout:.0f} s"
                ) from None
            self.result = Finished(
                returncode=self.process.returncode,
                stdout=out.decode(errors="replace"),
                stderr=err,
                run_dir=self.run_dir,
                run_id=self.run_id,
                seconds=time.monotonic() - self.started,
            )
        return self.result


@dataclass
class Runs:
    """Starts `ssebench run` with the suite's agents; removes what its runs leave."""

    workdir: Path
    agent_path: Path
    client: docker.DockerClient
    mode: str = "sandbox"
    started: list[Started] = field(default_factory=list)
    waiting: dict[str, Started] = field(default_factory=dict)

    def start(
        self,
        task: str,
        agent: str,
        *,
        difficulty: int = 2,
        egress: str = "restricted",
        timeout: int = 120,
        check_timeout: int | None = None,
        dataset: Path | None = None,
    ) -> Started:
        """Start a run in the background (the CLI's output is collected by `finish`)."""
        run_id = f"integ-{agent}-{self.mode}-{secrets.token_hex(3)}"
        argv = [
            *ssebench_argv(),
            "run",
            "--mode",
            self.mode,
            "--task",
            task,
            "--agent",
            agent,
            "--run-id",
            run_id,
            "--difficulty",
            str(difficulty),
            "--egress",
            egress,
            "--timeout",
            str(timeout),
            "--json",
        ]
        if check_timeout is not None:
            argv += ["--check-timeout", str(check_timeout)]
        if dataset is not None:
            argv += ["--local", str(dataset)]
        env = {
            **os.environ,
            "SSEBENCH_AGENT_PATH": str(self.agent_path),
            "SSEBENCH_HOME": str(HOME),
        }
        process = subprocess.Popen(
            argv,
            cwd=self.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        run_dir = self.workdir / "results" / task / "none" / agent / run_id
        self.started.append(Started(argv, process, run_dir, run_id, time.monotonic()))
        return self.started[-1]

    def run(self, task: str, agent: str, **options: Any) -> Finished:
        """One whole run (see `start` for the options)."""
        return self.start(task, agent, **options).finish()

    def containers(self, run_id: str) -> list[Any]:
        """The run's containers: its one, or a sidecar pair's two (task container first)."""
        found: dict[str, Any] = {}
        for label in (labels.RUN_ID, labels.RUN):
            wanted: dict[str, str | list[str] | bool] = {"label": f"{label}={run_id}"}
            # Listed, then read one by one: a container that ends meanwhile (the run's
            # short-lived helpers do) is skipped, not an error.
            for summary in self.client.api.containers(all=True, filters=wanted):
                with contextlib.suppress(docker.errors.NotFound):
                    found.setdefault(summary["Id"], self.client.containers.get(summary["Id"]))
        return list(found.values())

    def leftovers(self, run_id: str) -> list[str]:
        """Containers, networks and volumes still carrying the run's ID label (or pair label)."""
        found = [f"container {c.name}" for c in self.containers(run_id)]
        for label in (labels.RUN_ID, labels.RUN):
            wanted = {"label": f"{label}={run_id}"}
            found += [f"network {n.name}" for n in self.client.networks.list(filters=wanted)]
            found += [f"volume {v.name}" for v in self.client.volumes.list(filters=wanted)]
        return sorted(set(found))

    def remove_all(self) -> None:
        """Stop the CLIs still running (as a user would: SIGTERM), remove what is left."""
        for run in self.started:
            if run.process.poll() is None:
                run.process.terminate()
                try:
                    run.process.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    run.process.kill()
                    run.process.communicate()
            wanted = {"label": f"{labels.RUN_ID}={run.run_id}"}
            # A pair's agent container first: it uses the task container's network.
            for container in reversed(self.containers(run.run_id)):
                container.remove(force=True, v=True)
            for network in self.client.networks.list(filters=wanted):
                network.remove()
            pair = {"label": f"{labels.RUN}={run.run_id}"}
            for volume in self.client.volumes.list(filters=pair):
                volume.remove(force=True)


def _assemble_agents(target: Path) -> None:
    """Each agent folder with the shared files beside its own (a registry placeholder in a
    Dockerfile filled in). Same content every time, so the agent layers stay cached."""
    from ssebench.spec import registry

    for folder in sorted(AGENT_SOURCES.iterdir()):
        if folder.name.startswith("_") or not (folder / "agent.yaml").is_file():
            continue
        shutil.copytree(folder, target / folder.name)
        for shared in SHARED.iterdir():
            shutil.copy2(shared, target / folder.name / shared.name)
        dockerfile = target / folder.name / "Dockerfile"
        dockerfile.write_text(dockerfile.read_text().replace(REGISTRY_PLACEHOLDER, registry()))


@pytest.fixture(scope="session")
def runs_by_mode(
    tmp_path_factory: pytest.TempPathFactory, docker_client: docker.DockerClient
) -> Iterator[dict[str, Runs]]:
    """`ssebench run` for the whole session, per mode: one results folder, the assembled
    agents (shared by both modes)."""
    agents = tmp_path_factory.mktemp("integrity-agents")
    _assemble_agents(agents)
    found = {
        mode: Runs(tmp_path_factory.mktemp(f"integrity-runs-{mode}"), agents, docker_client, mode)
        for mode in MODES
    }
    yield found
    for each in found.values():
        each.remove_all()


@pytest.fixture(scope="session", params=MODES)
def runs(request: pytest.FixtureRequest, runs_by_mode: dict[str, Runs]) -> Runs:
    """The runs of one mode: every test using it runs in sandbox and in sidecar mode."""
    return runs_by_mode[request.param]


def _start_hanging_poc(runs: Runs) -> Started:
    if "hanging_poc_run" not in runs.waiting:
        runs.waiting["hanging_poc_run"] = runs.start(
            PYARCHIVE, "hang-poc", difficulty=4, timeout=30, check_timeout=10
        )
    return runs.waiting["hanging_poc_run"]


@pytest.fixture(scope="session")
def hanging_poc_run(runs: Runs) -> Started:
    """The run whose patch makes a PoC hang (test_agent_cannot_force_an_error.py).

    It waits out a check's time limit in grading (minutes), so it starts with the
    session (`_waiting_runs_start_first`, in both modes) and the other tests run meanwhile.
    """
    return _start_hanging_poc(runs)


WAITING_RUNS = ("hanging_poc_run",)
"""Session fixtures of runs that mostly wait; started before the first test if wanted."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that wait for a waiting run go last, so the others run while it waits."""
    waiting = [item for item in items if set(getattr(item, "fixturenames", ())) & set(WAITING_RUNS)]
    items[:] = [item for item in items if item not in waiting] + waiting


@pytest.fixture(scope="session", autouse=True)
def _waiting_runs_start_first(request: pytest.FixtureRequest) -> None:
    modes = {
        item.callspec.params.get("runs")
        for item in request.session.items
        if "hanging_poc_run" in getattr(item, "fixturenames", ()) and hasattr(item, "callspec")
    }
    if not modes:
        return
    by_mode: dict[str, Runs] = request.getfixturevalue("runs_by_mode")
    for mode in MODES:
        if mode in modes:
            _start_hanging_poc(by_mode[mode])


# -- what a task hides ---------------------------------------------------------------------


def _added_lines(diff: str) -> list[str]:
    return [
        line[1:].strip()
        for line in diff.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]


@dataclass(frozen=True)
class Hidden:
    """What a task hides from the agent, in forms a leak can be recognised by.

    `snippets`: distinctive lines of the reference patch, the hidden tests and the
    run script (lines that also occur in anything public are left out); `pocs`: the
    proofs of concept's bytes.
    """

    task: str
    snippets: dict[str, list[str]]
    pocs: dict[str, bytes]

    @classmethod
    def of(cls, task_folder: Path) -> Hidden:
        sse = task_folder / "sse"
        public = "\n".join(
            path.read_text(errors="replace")
            for path in [
                *sorted((task_folder / "src").rglob("*")),
                *sorted((sse / "reports").glob("*")),
                sse / "build.sh",
                sse / "test.sh",
                sse / "config.yaml",
            ]
            if path.is_file()
        )
        hidden = {
            "reference patch": _added_lines((sse / "diffs" / "patch.diff").read_text()),
            "hidden tests": _added_lines((sse / "diffs" / "test.diff").read_text()),
            "run.sh": [line.strip() for line in (sse / "run.sh").read_text().splitlines()],
        }
        snippets = {
            what: [line for line in lines if len(line) >= 16 and line not in public]
            for what, lines in hidden.items()
        }
        assert all(snippets.values()), f"nothing distinctive to look for in {task_folder}"
        pocs = {path.name: path.read_bytes() for path in sorted((sse / "pocs").iterdir())}
        return cls(task_folder.name, snippets, pocs)

    def leaks_in(self, data: bytes, *, kinds: tuple[str, ...] | None = None) -> list[str]:
        """What of the hidden material is in `data` (a JSON file's strings count unescaped)."""
        texts = [data.decode("utf-8", errors="replace")]
        with contextlib.suppress(ValueError):
            texts.append("\n".join(_strings(json.loads(data))))
        found = []
        for what, lines in self.snippets.items():
            if kinds is not None and what not in kinds:
                continue
            hits = [line for line in lines if any(line in text for text in texts)]
            if hits:
                found.append(f"{what}: {hits[0]!r}")
        if kinds is None or "pocs" in kinds:
            for name, poc in self.pocs.items():
                if len(poc) >= 16 and poc in data:
                    found.append(f"PoC {name}")
        return found

    def leaks_under(
        self, folder: Path, *, kinds: tuple[str, ...] | None = None
    ) -> dict[str, list[str]]:
        """Every regular file under `folder` (no link followed) that holds hidden material."""
        found = {}
        for top, dirs, files in os.walk(folder):
            for name in [*files, *dirs]:
                path = Path(top, name)
                if path.is_symlink() or not path.is_file():
                    continue
                leaks = self.leaks_in(path.read_bytes(), kinds=kinds)
                if leaks:
                    found[str(path.relative_to(folder))] = leaks
        return found


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.fixture(scope="session")
def hidden() -> dict[str, Hidden]:
    """What each demo task hides, by task ID."""
    return {task: Hidden.of(DEMO / task) for task in DEMO_TASKS}


# -- an internet stand-in ------------------------------------------------------------------

NETNS = "ssebtest-integ"
HOST_SIDE, STANDIN_IP = "198.18.9.1", "198.18.9.2"  # RFC 2544 benchmark range, local only
STANDIN_PORT = 8099
STANDIN = f"{STANDIN_IP}:{STANDIN_PORT}"
"""Where the stand-in answers; the agents have it written in (nothing can tell them)."""

# A bare TCP server: http.server would look its own name up, sending DNS queries out.
# `GET /<name>` answers the file <state>/<name> when the test wrote one, else "hello".
_SERVER = r"""
import os, socketserver, sys

STATE = sys.argv[3]

class Answer(socketserver.BaseRequestHandler):
    def handle(self):
        request = self.request.recv(4096).decode("latin-1")
        parts = request.split(" ")
        name = parts[1].strip("/") if len(parts) > 1 else ""
        body = b"hello\n"
        path = os.path.join(STATE, name)
        if name and "/" not in name and os.path.isfile(path):
            body = open(path, "rb").read()
        self.request.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + body)

socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer((sys.argv[1], int(sys.argv[2])), Answer).serve_forever()
"""


@dataclass(frozen=True)
class Standin:
    """The stand-in's address and the folder of answers the test gives it."""

    address: str
    state: Path

    def answer(self, name: str, text: str) -> None:
        """From now on `GET /<name>` answers `text`."""
        temporary = self.state / f".{name}.tmp"
        temporary.write_text(text)
        temporary.replace(self.state / name)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture(scope="session")
def internet_standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standin]:
    """A server in a network namespace of its own (see tests/backends/test_docker_egress.py)."""
    if shutil.which("ip") is None:
        pytest.fail("iproute2 is needed to stand up the test's network namespace")
    state = tmp_path_factory.mktemp("standin")
    subprocess.run(["ip", "link", "del", "ssebti-h"], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)
    _ip("netns", "add", NETNS)
    server = None
    try:
        _ip("link", "add", "ssebti-h", "type", "veth", "peer", "name", "ssebti-n")
        _ip("link", "set", "ssebti-n", "netns", NETNS)
        _ip("addr", "add", f"{HOST_SIDE}/30", "dev", "ssebti-h")
        _ip("link", "set", "ssebti-h", "up")
        _ip("-n", NETNS, "addr", "add", f"{STANDIN_IP}/30", "dev", "ssebti-n")
        _ip("-n", NETNS, "link", "set", "ssebti-n", "up")
        _ip("-n", NETNS, "link", "set", "lo", "up")
        # No default route in the namespace: it can answer the host side and nothing else.
        server_args = [STANDIN_IP, str(STANDIN_PORT), str(state)]
        server = subprocess.Popen(
            ["ip", "netns", "exec", NETNS, sys.executable, "-c", _SERVER, *server_args]
        )
        _wait_until_listening(STANDIN_IP, STANDIN_PORT)
        yield Standin(STANDIN, state)
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", "ssebti-h"], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)


class _Hello(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"HTTP/1.0 200 OK\r\n\r\nhost\n")


@pytest.fixture(scope="session")
def host_listener(internet_standin: Standin) -> Iterator[str]:
    """A server of this host, on its side of the stand-in's link (HOST_SIDE, the stand-in's
    port), in the host's own namespace: a run that reaches the host finds it answering, so
    a refused connection cannot pass for a blocked one."""
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    server = socketserver.ThreadingTCPServer((HOST_SIDE, STANDIN_PORT), _Hello)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        _wait_until_listening(HOST_SIDE, STANDIN_PORT)
        yield f"{HOST_SIDE}:{STANDIN_PORT}"
    finally:
        server.shutdown()
        server.server_close()


def _wait_until_listening(host: str, port: int) -> None:
    import socket

    for _ in range(100):
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the stand-in server at {host}:{port} never listened")


# -- helpers for the tests' own judgement -----------------------------------------------------


def container_address(runs: Runs, run_id: str, deadline: float) -> str:
    """The IP address of a running run's container on its own network."""
    while time.monotonic() < deadline:
        for container in runs.containers(run_id):
            networks = container.attrs["NetworkSettings"]["Networks"] or {}
            for network in networks.values():
                if network.get("IPAddress"):
                    return str(network["IPAddress"])
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} has no container with an address")


def wait_for_output(runs: Runs, run_id: str, pattern: str, deadline: float) -> None:
    """Wait until a run's container printed a line matching `pattern`."""
    while time.monotonic() < deadline:
        for container in runs.containers(run_id):
            if re.search(pattern, container.logs().decode(errors="replace"), re.MULTILINE):
                return
        time.sleep(0.3)
    raise AssertionError(f"run {run_id} never printed {pattern!r}")
