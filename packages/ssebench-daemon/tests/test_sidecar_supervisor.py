"""The task container's PID 1 in sidecar mode (`python -m ssebench.daemon.sidecar`): the
daemon's output in daemon.log, a stop signal passed on, the daemon's status kept.

Each test runs the supervisor in a process of its own (it reaps every child it has),
with a stand-in for the daemon.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

STAND_IN = "import sys, time; print('daemon up', flush=True); {rest}"


def supervise(results: Path, daemon: str, **env: str) -> subprocess.Popen[str]:
    script = (
        "import sys\nfrom ssebench.daemon.sidecar import main\n"
        f"sys.exit(main([sys.executable, '-c', {daemon!r}]))\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", script],
        env={**os.environ, "SSE_RESULTS": str(results), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_log(path: Path, text: str, seconds: float = 30) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.is_file() and text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never said {text!r}")


def test_the_daemons_output_goes_to_daemon_log_and_a_stop_ends_it_with_143(
    tmp_path: Path,
) -> None:
    proc = supervise(tmp_path, STAND_IN.format(rest="time.sleep(120)"))
    wait_for_log(tmp_path / "daemon.log", "daemon up")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "ssebench-sidecar: daemon started" in err
    assert "daemon ended" in err


def test_a_daemon_that_ignores_the_stop_is_killed_after_the_wait(tmp_path: Path) -> None:
    stubborn = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    proc = supervise(tmp_path, STAND_IN.format(rest=stubborn))
    wait_for_log(tmp_path / "daemon.log", "daemon up")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert time.monotonic() - started < 15


def test_a_daemon_that_ends_by_itself_gives_its_status(tmp_path: Path) -> None:
    proc = supervise(tmp_path, STAND_IN.format(rest="sys.exit(3)"))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    assert (tmp_path / "daemon.log").read_text() == "daemon up\n"


def test_the_process_limit_is_named_in_daemon_log_and_a_bad_one_refused(tmp_path: Path) -> None:
    # Far above what the host holds (pid_max): the watchdog watches and never kills here.
    proc = supervise(tmp_path, STAND_IN.format(rest="sys.exit(0)"), SSE_PIDS_LIMIT="10000000")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    log = (tmp_path / "daemon.log").read_text()
    assert "ssebench-sidecar: process limit 10000000 (SSE_PIDS_LIMIT): " in log, log
    assert "process limit 10000000 (SSE_PIDS_LIMIT): " in err

    bad = supervise(tmp_path, STAND_IN.format(rest="sys.exit(0)"), SSE_PIDS_LIMIT="lots")
    _, err = bad.communicate(timeout=30)
    assert bad.returncode == 2
    assert "refusing to start: SSE_PIDS_LIMIT='lots' is not a process limit" in err
