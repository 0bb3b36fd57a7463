"""The one environment sanitizer and the one uid killer (`ssebench.daemon._users`),
shared by the daemon server and the entrypoint."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ssebench.daemon import UidKiller
from ssebench.daemon._users import (
    LOADER_PREFIXES,
    NICENESS,
    OOM_SCORE_ADJ,
    PASSED_PREFIXES,
    PRIVATE_MARKERS,
    PROXY_NAMES,
    REPLACED,
    RUN_SETTINGS,
    Identity,
    child_env,
    current_identity,
    kill_user,
    killable_as,
    lower_own_oom_score,
    processes_of,
)
from ssebench.spec import contract

NOBODY = Identity(name="nobody", uid=65534, gid=65534, home="/nonexistent")
CHECK = Identity(name="sse-runner", uid=1001, gid=1001, home="/home/sse-runner")

IMAGE_ENV = {
    "PATH": "/opt/ssebench/bin:/usr/local/go/bin:relative:/usr/bin",
    "HOME": "/root",
    "USER": "root",
    "PWD": "/",
    "OLDPWD": "/tmp",
    "HOSTNAME": "box",
    "SHELL": "/bin/zsh",
    "SSE_API_KEY": "k",
    "SSE_BASE_URL": "u",
    "SSE_RESULTS": "/var/lib/ssebench/results",
    "SSEBENCH_REGISTRY": "r",
    "TIMEOUT": "60",
    "GOPATH": "/go",
    "JAVA_HOME": "/usr/lib/jvm/java",
    "LD_PRELOAD": "/evil.so",
    "LD_LIBRARY_PATH": "/lib/x",
    "PYTHONPATH": "/somewhere",
    "SOCKET": "/run/ssebench/admin.sock",
    "RUNTIME": "/opt/ssebench/lib",
    "https_proxy": "http://proxy:3128",
    "NO_PROXY": "localhost",
    "LC_ALL": "C.UTF-8",
    "not-a-name": "x",
    "LANG.odd": "y",
}


def test_the_stripped_kinds_of_variable_are_pinned() -> None:
    # Changing what reaches the agent, a check, the shell or git is a decision: say it here.
    assert RUN_SETTINGS == ("SSE_", "SSEBENCH_")
    assert LOADER_PREFIXES == ("PYTHON", "LD_")
    assert PRIVATE_MARKERS == ("/opt/ssebench", "/run/ssebench/admin", "admin.sock")
    assert {
        "TIMEOUT", "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "HOSTNAME",
    } == REPLACED  # fmt: skip
    assert {"SSE_API_KEY"} == contract.SECRET_ENV
    assert PASSED_PREFIXES == ("LANG", "LC_", "TZ", "TERM")
    assert {"http_proxy", "https_proxy", "no_proxy"} <= PROXY_NAMES


def test_a_checks_environment_keeps_the_images_toolchain_and_nothing_of_the_run() -> None:
    env = child_env(IMAGE_ENV, CHECK)
    assert env == {
        "PATH": "/usr/local/go/bin:/usr/bin",
        "HOME": "/home/sse-runner",
        "USER": "sse-runner",
        "LOGNAME": "sse-runner",
        "SHELL": env["SHELL"],
        "GOPATH": "/go",
        "JAVA_HOME": "/usr/lib/jvm/java",
        "https_proxy": "http://proxy:3128",
        "NO_PROXY": "localhost",
        "LC_ALL": "C.UTF-8",
        "LANG.odd": "y",
    }
    assert env["SHELL"] in ("/bin/bash", "/bin/sh")


def test_kept_variables_pass_even_secrets_but_never_a_runtime_or_admin_path() -> None:
    env = child_env(
        IMAGE_ENV,
        CHECK,
        keep=("SSE_API_KEY", "TIMEOUT", "SOCKET", "SSE_ABSENT"),
        extra={"EXTRA": "1"},
    )
    assert env["SSE_API_KEY"] == "k"
    assert env["TIMEOUT"] == "60"
    assert "SOCKET" not in env
    assert "SSE_ABSENT" not in env
    assert env["EXTRA"] == "1"


def test_the_killer_refuses_root_and_its_own_user() -> None:
    me = current_identity()
    for who in (Identity(name="root", uid=0, gid=0, home="/root"), me):
        with pytest.raises(ValueError, match="refusing"):
            kill_user(who)


# A background job that leaves the session, and the shell that started it.
_ESCAPE = "setsid sleep 600 & sleep 600"


@pytest.mark.process
@pytest.mark.skipif(os.geteuid() != 0, reason="running processes as another user needs root")
def test_every_process_of_the_user_dies_also_one_that_left_the_session() -> None:
    proc = subprocess.Popen(
        ["/bin/sh", "-c", _ESCAPE], cwd="/", user=NOBODY.uid, group=NOBODY.gid, extra_groups=[]
    )
    try:
        deadline = time.monotonic() + 10
        while len(processes_of(NOBODY.uid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(processes_of(NOBODY.uid)) >= 2
        # The daemon's killer is this same function, run in a thread.
        killed = asyncio.run(UidKiller().kill_all(NOBODY))
        assert killed >= 2
        assert processes_of(NOBODY.uid) == []
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.process
@pytest.mark.skipif(os.geteuid() != 0, reason="running processes as another user needs root")
def test_a_killable_child_is_the_user_with_no_groups_and_oom_score_adj_1000() -> None:
    done = subprocess.run(
        ["sh", "-c", "id -u; id -g; id -G; cat /proc/self/oom_score_adj"],
        capture_output=True,
        text=True,
        check=True,
        **killable_as(NOBODY),
    )

    assert done.stdout.split("\n")[:4] == ["65534", "65534", "65534", str(OOM_SCORE_ADJ)]
    assert OOM_SCORE_ADJ == 1000
    # The parent, a root service, keeps its own score.
    assert Path("/proc/self/oom_score_adj").read_text().strip() != "1000"


_KUBELET_SCORE = """
import subprocess, sys
from pathlib import Path
from ssebench.daemon._users import lower_own_oom_score
Path("/proc/self/oom_score_adj").write_text("990")  # a Burstable pod's, as the kubelet sets it
print(lower_own_oom_score())
print(lower_own_oom_score())
print(subprocess.run(["cat", "/proc/self/oom_score_adj"], capture_output=True, text=True).stdout)
"""


@pytest.mark.process
def test_a_root_service_started_at_the_kubelets_score_lowers_it_and_its_children_inherit_it() -> (
    None
):
    """The kubelet starts a pod's processes at 990; the agent's at 1000 are then barely
    more killable than a Python service (see ROOT_OOM_SCORE_ADJ)."""
    done = subprocess.run(
        [sys.executable, "-c", _KUBELET_SCORE], capture_output=True, text=True, check=True
    )

    assert done.stdout.split("\n")[:3] == [
        "oom_score_adj 990 lowered to 0: in the memory limit the kernel kills the agent's "
        "and the checks' processes (1000) first",
        "None",
        "0",
    ], done.stdout


class _PinnedScore(type(Path())):  # type: ignore[misc]
    """A score file the runtime pinned: readable, refusing the write (CAP_SYS_RESOURCE)."""

    def write_text(self, *args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")


def test_a_score_the_runtime_pinned_is_reported_not_raised(tmp_path: Path) -> None:
    pinned = _PinnedScore(tmp_path / "oom_score_adj")
    Path(pinned).write_text("990")

    assert lower_own_oom_score(pinned) == (
        "oom_score_adj 990: cannot lower it to 0 (Permission denied; the runtime pinned it): "
        "in the memory limit the kernel may kill a root service before the agent's small "
        "processes (1000)"
    )
    (tmp_path / "low").write_text("0")
    assert lower_own_oom_score(tmp_path / "low") is None
    assert lower_own_oom_score(tmp_path / "missing") is None


_PRIORITY = """
import os
print(os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0) == os.SCHED_IDLE)
try:
    os.setpriority(os.PRIO_PROCESS, 0, 0)
except PermissionError:
    print("cannot lower it")
"""


@pytest.mark.process
@pytest.mark.skipif(os.geteuid() != 0, reason="running processes as another user needs root")
def test_a_killable_child_runs_at_nice_19_idle_and_cannot_take_priority_back() -> None:
    done = subprocess.run(
        ["/usr/bin/python3", "-I", "-c", _PRIORITY],  # one nobody may run
        capture_output=True,
        text=True,
        check=True,
        **killable_as(NOBODY),
    )

    assert done.stdout.split("\n")[:2] == [f"{NICENESS} True", "cannot lower it"], done.stdout
    # The parent, a root service, keeps its priority.
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0
