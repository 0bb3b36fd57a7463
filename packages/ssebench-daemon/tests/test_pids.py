"""The process-limit watchdog (`ssebench.daemon._pids`): the kernel's limit is left to the
kernel; otherwise a user's processes past the limit are killed, and not before."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ssebench.daemon._environ import parse_pids_limit
from ssebench.daemon._errors import ConfigError
from ssebench.daemon._pids import PidsWatchdog, cgroup_pids_max
from ssebench.daemon._users import Identity

NOBODY = Identity(name="nobody", uid=65534, gid=65534, home="/nonexistent")


def test_the_limit_is_parsed_or_refused_in_one_line() -> None:
    assert parse_pids_limit(None) is None
    assert parse_pids_limit("") is None
    assert parse_pids_limit("128") == 128
    for bad in ("0", "-1", "lots", "1.5", "١٢"):
        with pytest.raises(ConfigError, match="SSE_PIDS_LIMIT"):
            parse_pids_limit(bad)


def test_a_cgroup_that_holds_the_limit_leaves_nothing_to_watch(tmp_path: Path) -> None:
    v1 = tmp_path / "pids.max"
    v1.write_text("128\n")
    said: list[str] = []
    assert cgroup_pids_max([tmp_path / "absent", v1]) == "128"
    assert cgroup_pids_max([tmp_path / "absent"]) is None
    dog = PidsWatchdog(128, said.append, [NOBODY], cgroup_files=[v1])
    assert dog.start() is False
    assert said == ["process limit 128 (SSE_PIDS_LIMIT): held by the kernel (cgroup pids.max 128)"]
    # A looser cgroup limit, or none, is not the run's: the watchdog watches.
    for text in ("4096", "max"):
        v1.write_text(text)
        dog = PidsWatchdog(128, said.append, [NOBODY], cgroup_files=[v1])
        try:
            assert dog.start() is True
        finally:
            dog.stop()
        assert f"not held by the kernel (cgroup pids.max {text})" in said[-1]


# PID 1 of a new PID namespace: the watchdog at LIMIT, and a shell as nobody that starts
# FIRST sleepers (under the limit), then, told to, MORE (half of them setsid: out of its
# session), so the namespace passes the limit. It reaps as PID 1 does and reports JSON.
BOX = r"""
import json, os, subprocess, sys, time
from ssebench.daemon._pids import PidsWatchdog, count_tasks
from ssebench.daemon._users import Identity, processes_of
LIMIT, FIRST, MORE = 40, 30, 20
nobody = Identity(name="nobody", uid=65534, gid=65534, home="/nonexistent")
said = []
dog = PidsWatchdog(LIMIT, said.append, [nobody], period=0.05, cgroup_files=[])
dog.start()
script = (f"for i in $(seq {FIRST}); do sleep 600 & done; echo up; read go; "
          f"for i in $(seq {MORE // 2}); do sleep 600 & setsid sleep 600 & done; echo more; wait")
shell = subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         user=nobody.uid, group=nobody.gid, extra_groups=[], text=True)
def reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
assert shell.stdout.readline() == "up\n"
end = time.monotonic() + 1.5
while time.monotonic() < end:
    reap(); time.sleep(0.05)
before = {"count": count_tasks(), "alive": len(processes_of(nobody.uid)), "killed": dog.killed,
          "said": list(said)}
shell.stdin.write("go\n"); shell.stdin.flush()
end = time.monotonic() + 20
while time.monotonic() < end and (dog.killed == 0 or processes_of(nobody.uid)):
    reap(); time.sleep(0.05)
dog.stop()
print(json.dumps({"before": before, "after": {"alive": len(processes_of(nobody.uid)),
                  "killed": dog.killed, "said": said}}))
"""


@pytest.mark.process
@pytest.mark.skipif(os.geteuid() != 0, reason="a PID namespace and another user need root")
def test_a_users_processes_past_the_limit_are_killed_and_not_before(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is missing"
    done = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", sys.executable, "-I", "-c", BOX],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    before, after = report["before"], report["after"]
    # Under the limit (PID 1's two threads, the shell, 30 sleepers): nothing is touched.
    assert before["count"] <= 40, before
    assert before["alive"] == 31 and before["killed"] == 0, before
    assert before["said"] == [
        "process limit 40 (SSE_PIDS_LIMIT): not held by the kernel (cgroup pids.max unknown): "
        "counting this container's processes every 0.05 s"
    ]
    # Past it: every process of the user is gone, those that left the session too.
    assert after["alive"] == 0, after
    assert after["killed"] > 31, after
    (line,) = [text for text in after["said"] if "passed" in text]
    assert line.startswith("process limit 40 passed: "), line
    assert line.endswith("processes and threads in the container; killing every process of nobody")
    (killed,) = [text for text in after["said"] if ": killed " in text]
    assert killed.startswith("process limit 40: killed ")
    assert killed.endswith("process(es) of nobody (uid 65534)"), killed
