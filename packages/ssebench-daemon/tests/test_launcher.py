"""The agent container's launcher as the agent container runs it: PID 1, as `model`, in a
container of a tool image (the sealed runtime's Python), with real signals."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ssebench.spec import contract

pytestmark = pytest.mark.docker

LAUNCH = (
    "import sys; from pathlib import Path; from ssebench.daemon.launcher._main import main; "
    "sys.exit(main(sys.argv[2:], Path(sys.argv[1])))"
)

Launch = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def launch(tool_image: Callable[..., str], tmp_path: Path) -> Iterator[Launch]:
    """Start the launcher in a container with `tmp_path` as its working directory (/w)."""
    image = tool_image("pyarchive-path-traversal")
    os.chown(tmp_path, contract.MODEL_UID, contract.MODEL_UID)
    names: list[str] = []

    def start(*command: str, user: str = "1000:1000", **env: str) -> subprocess.Popen[bytes]:
        name = f"sse-launcher-test-{os.getpid()}-{len(names)}-{tmp_path.name[-12:]}".lower()
        names.append(name)
        environ = {
            "SSE_API_KEY": "sk-test",
            "SSE_MODE": "sidecar",
            "SSE_MCP_URL": contract.MCP_URL,
            "SSE_DAEMON_SOCKET": contract.SIDECAR_DAEMON_SOCKET,
            "SSE_RESULTS": contract.RESULTS_DIR,
            **env,
        }
        argv = ["docker", "run", "--rm", "--name", name, "--user", user, "--network", "none"]
        argv += ["--volume", f"{tmp_path}:/w", "--workdir", "/w"]
        argv += ["--entrypoint", contract.RUNTIME_PYTHON]
        for key, value in environ.items():
            argv += ["--env", f"{key}={value}"]
        argv += [image, "-I", "-c", LAUNCH, "/w/go", *command]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    yield start
    for name in names:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_the_agent_starts_on_go_as_model_and_its_status_is_the_containers(
    launch: Launch, tmp_path: Path
) -> None:
    proc = launch("/bin/bash", "-c", 'id -u > uid; env > env.txt; pwd; echo "in $SSE_MODE"; exit 5')
    time.sleep(2)
    assert proc.poll() is None and not (tmp_path / "env.txt").exists(), "it waits for go"
    (tmp_path / "go").touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5, err
    assert out.decode().splitlines() == ["/w", "in sidecar"]
    assert (tmp_path / "uid").read_text().strip() == str(contract.MODEL_UID)
    lines = (tmp_path / "env.txt").read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines if "=" in line)
    assert env["SSE_MCP_URL"] == contract.MCP_URL
    assert env["SSE_DAEMON_SOCKET"] == contract.SIDECAR_DAEMON_SOCKET
    assert env["SSE_API_KEY"] == "sk-test"
    assert "SSE_RESULTS" not in env
    assert "/opt/ssebench" not in env["PATH"]


def test_what_the_agent_left_running_is_killed_when_it_exits(
    launch: Launch, tmp_path: Path
) -> None:
    (tmp_path / "go").touch()
    proc = launch(
        "/bin/bash", "-c", "setsid sleep 300 & echo $! > child; sleep 0.5; exit 0", TIMEOUT="60"
    )
    _, err = proc.communicate(timeout=60)
    # The container ended with the launcher: had the child survived, PID 1's exit
    # would still have killed it; the launcher says so itself before it exits.
    assert proc.returncode == 0, err
    assert (tmp_path / "child").read_text().strip()


def test_the_agent_is_cut_off_at_its_time_limit_with_124(launch: Launch, tmp_path: Path) -> None:
    (tmp_path / "go").touch()
    started = time.monotonic()
    proc = launch("/bin/sleep", "120", TIMEOUT="1")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 124, err
    assert time.monotonic() - started < 30


def test_a_stop_signal_ends_the_agent_and_the_launcher_with_143(
    launch: Launch, tmp_path: Path
) -> None:
    (tmp_path / "go").touch()
    proc = launch("/bin/bash", "-c", "touch started; sleep 120")
    wait_for(tmp_path / "started")
    name = proc.args[4]  # type: ignore[index]
    subprocess.run(["docker", "kill", "--signal", "TERM", name], check=True, capture_output=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err


def test_the_launcher_refuses_root_and_a_missing_command_in_one_line(launch: Launch) -> None:
    as_root = launch("/bin/true", user="0:0")
    _, err = as_root.communicate(timeout=60)
    assert as_root.returncode == 2
    assert err.decode().strip() == (
        "ssebench-launcher: refusing to start: the agent container never runs root: "
        "start it as model (uid 1000), not as root"
    )
    empty = launch()
    _, err = empty.communicate(timeout=60)
    assert empty.returncode == 2
    assert err.decode().strip() == (
        "ssebench-launcher: refusing to start: no agent command: "
        f"{contract.AGENT_COMMAND_FILE} is missing (an agent image SSEBench did not seal)"
    )


def test_a_fork_bomb_past_the_process_limit_is_killed_when_the_kernel_does_not_hold_it(
    launch: Launch, tmp_path: Path
) -> None:
    """No `--pids-limit` (as on Kubernetes): the launcher counts its container's processes
    and, past `SSE_PIDS_LIMIT`, ends every one of them but itself: the agent's status is
    137 and the launcher says so."""
    bomb = "for i in $(seq 200); do sleep 300 & done; wait"
    proc = launch("/bin/bash", "-c", bomb, SSE_PIDS_LIMIT="50", TIMEOUT="120")
    (tmp_path / "go").touch()
    _, err = proc.communicate(timeout=120)
    said = err.decode()
    assert proc.returncode == 137, said
    assert "process limit 50 (SSE_PIDS_LIMIT): not held by the kernel" in said
    assert "process limit 50 passed: " in said and "killing every process of model" in said
    killed = [line for line in said.splitlines() if "process limit 50: killed " in line]
    assert killed and "process(es) of model (uid 1000)" in killed[0], said
