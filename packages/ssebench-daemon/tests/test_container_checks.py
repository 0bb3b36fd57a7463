"""Checks as `sse-runner`, grading over the admin socket, diff capture and bad input,
in real tool-image containers."""

from __future__ import annotations

import threading
import time

import pytest

from .boxes import PYTHON, Answer, Box, bash, bencher, get, post
from .conftest import StartBox

pytestmark = pytest.mark.docker

RESULTS = "/var/lib/ssebench/results"

HOSTILE = r"""#!/bin/bash
# Committed by the agent and run by the package, which every build imports.
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G) user=$(id -un)"
cat /ssebench/diffs/patch.diff 2>/dev/null && echo "LEAK: read the reference patch"
cat /ssebench/config.yaml 2>/dev/null && echo "LEAK: read the task config"
ls /ssebench-repo 2>/dev/null && echo "LEAK: listed /ssebench-repo"
ls /var/lib/ssebench/results 2>/dev/null && echo "LEAK: listed the results"
echo '{"patch_result": {}}' > /var/lib/ssebench/results/result.json 2>/dev/null \
  && echo "LEAK: wrote result.json"
touch /src/pyarchive/planted 2>/dev/null && echo "LEAK: wrote into the agent's tree"
touch /ssebench-repo/planted 2>/dev/null && echo "LEAK: wrote into /ssebench-repo"
ls /var/lib/ssebench-runner 2>/dev/null && echo "LEAK: listed the scratch directory"
echo left-behind > /tmp/runner-file
setsid bash -c 'while :; do date +%N >> /tmp/heartbeat; sleep 0.1; done' <&- >&- 2>&- &
( setsid sleep 100000 </dev/null >/dev/null 2>&1 & )
echo "spawned"
"""

IMPORT_HOOK = "\nimport subprocess as _hook\n_hook.run(['bash', './hostile.sh'], check=False)\n"
"""Appended to pyarchive/__init__.py: its build imports the package. (Not the Makefile of
tlvkit, as before: the demo task protects it, so its changes are in no check.)"""


def assert_contained(box: Box, answer: Answer, runner_uid: str) -> None:
    body = answer.json()
    assert answer.status == 200, answer
    assert body["code"] == 0, body
    stdout = body["stdout"]
    assert f"uid={runner_uid} gid={runner_uid} groups={runner_uid} user=sse-runner" in stdout
    assert "spawned" in stdout
    assert "LEAK" not in stdout, stdout
    assert box.processes("sse-runner") == []
    assert box.sh(f"test -e {RESULTS}/result.json").returncode != 0
    assert (
        box.sh("test -e /src/pyarchive/planted || test -e /ssebench-repo/planted").returncode != 0
    )
    assert box.sh("test -e /tmp/runner-file").returncode != 0
    # Nothing is still writing the heartbeat (the sweep removed it).
    time.sleep(0.5)
    assert box.sh("test -e /tmp/heartbeat").returncode != 0


def test_a_hostile_build_runs_as_sse_runner_and_nothing_of_it_survives_the_check(
    daemon_in: StartBox,
) -> None:
    box = daemon_in("pyarchive-path-traversal", SSE_DIFFICULTY="0")
    runner_uid = box.out("id -u sse-runner").strip()
    commit = (
        f"cat > hostile.sh <<'SSE_END'\n{HOSTILE}SSE_END\n"
        f"cat >> pyarchive/__init__.py <<'SSE_END'\n{IMPORT_HOOK}SSE_END\n"
        "git add -A && "
        "git -c user.name=a -c user.email=a@a commit -q -m 'build tweak' && "
        "git log --oneline | wc -l"
    )
    committed = box.ok(bash("agent", commit))
    assert committed["code"] == 0, committed
    assert committed["stdout"] == "2\n"
    assert box.out("cat /src/pyarchive/hostile.sh", user="model") == HOSTILE

    # The agent phase: the agent asks for a build.
    assert_contained(box, box.one(bencher("agent", "build")), runner_uid)
    assert box.ok(bencher("agent", "run_poc"))["code"] != 0  # the bug is still there
    assert box.processes("sse-runner") == []

    # Grading: the same change, applied to /ssebench-repo, built from there.
    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True
    assert box.ok(post("admin", "/prepare_grading"))["success"] is True
    assert "hostile.sh" in box.out(f"cat {RESULTS}/final.patch")
    assert "build tweak" in box.out(f"cat {RESULTS}/commits.log")
    assert_contained(box, box.one(bencher("admin", "build", grading=True)), runner_uid)
    assert box.out("cat /ssebench-repo/hostile.sh") == HOSTILE
    logs = box.out(f"ls {RESULTS}").split()
    builds = [name for name in logs if name.endswith("-build.log")]
    assert len(builds) == 2, logs
    log = box.out(f"cat {RESULTS}/{builds[-1]}")
    assert "# exit code 0" in log
    assert "user=sse-runner" in log


def apply_reference_as_the_agent(box: Box) -> None:
    patch = box.ok(get("admin", "/reference/patch"))["diff"]
    applied = box.ok(bash("agent", f"git apply <<'SSE_PATCH_END'\n{patch}SSE_PATCH_END"))
    assert applied["code"] == 0, applied


def grade(box: Box, pocs: int) -> dict[str, int]:
    """The grading sequence the evaluator runs, over the admin socket."""
    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True
    assert box.ok(post("admin", "/prepare_grading"))["success"] is True
    codes = {"build": box.ok(bencher("admin", "build", grading=True))["code"]}
    for index in range(pocs):
        codes[f"poc{index}"] = box.ok(bencher("admin", "run_poc", poc=index, grading=True))["code"]
    for action in ("function_test", "intent_test"):
        codes[action] = box.ok(bencher("admin", action, grading=True))["code"]
    assert box.processes("sse-runner") == []
    return codes


@pytest.mark.parametrize("task", ["tlvkit-heap-overflow", "pyarchive-path-traversal"])
def test_grading_the_reference_fix_passes_every_check(daemon_in: StartBox, task: str) -> None:
    box = daemon_in(task)
    apply_reference_as_the_agent(box)
    assert box.ok(get("agent", "/files"))["files"]
    codes = grade(box, pocs=2)
    assert codes == dict.fromkeys(codes, 0), codes
    reference = box.ok(get("admin", "/reference/patch"))["diff"]
    final = box.ok(get("agent", "/final_diff"))["diff"]
    for line in reference.splitlines():
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            assert line in final.splitlines(), line
    assert box.out(f"cat {RESULTS}/final.patch") == final
    logs = box.out(f"ls {RESULTS}").split()
    assert {"final.patch", "commits.log"} <= set(logs)
    assert len([name for name in logs if name.startswith("check-")]) == 5, logs


@pytest.mark.parametrize("task", ["tlvkit-heap-overflow", "pyarchive-path-traversal"])
def test_grading_no_change_builds_and_passes_function_tests_while_every_poc_triggers(
    daemon_in: StartBox, task: str
) -> None:
    box = daemon_in(task)
    codes = grade(box, pocs=2)
    assert codes["build"] == 0
    assert codes["function_test"] == 0
    assert codes["poc0"] != 0
    assert codes["poc1"] != 0
    assert codes["intent_test"] != 0
    assert box.out(f"cat {RESULTS}/final.patch") == ""
    assert box.ok(get("admin", "/final_diff")) == {"diff": ""}


def test_run_poc_before_any_build_is_code_minus_one_with_a_message(daemon_in: StartBox) -> None:
    box = daemon_in("pyarchive-path-traversal", SSE_DIFFICULTY="1")
    body = box.ok(bencher("agent", "run_poc"))
    assert body["code"] == -1
    assert "nothing was built" in body["stderr"]
    assert box.ok(bencher("agent", "build"))["code"] == 0
    assert box.ok(bencher("agent", "run_poc", poc=0))["code"] == 1


CHANGES = r"""(
set -e
git() { command git -c user.name=a -c user.email=a@a "$@"; }
printf 'fixed\n' >> README.md
git commit -qam 'one'
git commit -q --amend -m 'amended' -a
head -c 3000 /dev/urandom > data.bin
mkdir docs && printf '\0\1\2binary\377' > docs/blob.dat
chmod +x pyarchive/_archive.py
ln -s pyarchive/_archive.py link-to-archive
ln -s /etc/passwd absolute-link
printf 'space\n' > 'with space.txt'
printf 'newline\n' > "$(printf 'with\nnewline.txt')"
rm pyarchive/__main__.py
git checkout -q --orphan rewritten
git commit -qm 'history rewritten'
)"""

TREE_HASH = r"""
import hashlib, os, stat, sys
root = sys.argv[1]
for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = sorted(d for d in dirnames if d != ".git")
    links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
    for name in sorted(filenames + links):
        path = os.path.join(dirpath, name)
        info = os.lstat(path)
        rel = os.path.relpath(path, root).encode("unicode_escape").decode()
        if stat.S_ISLNK(info.st_mode):
            print(rel, "link", os.readlink(path))
        else:
            digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
            print(rel, oct(info.st_mode & 0o111), digest)
"""


@pytest.mark.parametrize("remove_git", [False, True])
def test_the_diff_captures_every_kind_of_change_whatever_happened_to_git(
    daemon_in: StartBox, remove_git: bool
) -> None:
    box = daemon_in("pyarchive-path-traversal")
    done = box.ok(bash("agent", CHANGES + ("\nrm -rf .git" if remove_git else "")))
    assert done["code"] == 0, done
    files = {item["path"]: item["status"] for item in box.ok(get("agent", "/files"))["files"]}
    assert files == {
        "README.md": "modified",
        "absolute-link": "added",
        "data.bin": "added",
        "docs/blob.dat": "added",
        "link-to-archive": "added",
        "pyarchive/__main__.py": "deleted",
        "pyarchive/_archive.py": "modified",
        "with space.txt": "added",
        "with\nnewline.txt": "added",
    }
    diff = box.ok(get("agent", "/diff"))["diff"]
    assert "GIT binary patch" in diff
    assert "new mode 100755" in diff
    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True
    assert box.ok(post("admin", "/prepare_grading"))["success"] is True
    graded = box.exec([PYTHON, "-I", "-c", TREE_HASH, "/ssebench-repo"], check=True).stdout
    agent = box.exec([PYTHON, "-I", "-c", TREE_HASH, "/src/pyarchive"], check=True).stdout
    assert graded == agent
    assert b"absolute-link link /etc/passwd" in graded
    commits = box.out(f"cat {RESULTS}/commits.log")
    assert (".git was removed" in commits) if remove_git else ("history rewritten" in commits)


def test_a_diff_that_does_not_apply_is_a_clear_error(daemon_in: StartBox) -> None:
    box = daemon_in("pyarchive-path-traversal")
    box.ok(bash("agent", "printf 'agent\\n' >> README.md"))
    box.sh("printf 'moved on\\n' >> /ssebench-repo/README.md")  # the graded copy no longer matches
    box.ok(post("admin", "/admin/agent_exited"))
    answer = box.one(post("admin", "/prepare_grading"))
    assert (answer.status, answer.code) == (409, "patch_did_not_apply"), answer
    assert "patch did not apply" in answer.json()["error"]
    assert box.ok(get("admin", "/version"))


def test_bad_input_gets_clear_errors_and_the_daemon_keeps_serving(daemon_in: StartBox) -> None:
    box = daemon_in("pyarchive-path-traversal", SSE_DIFFICULTY="0", SSE_CHECK_TIMEOUT="4")
    answers = box.send(
        [
            post("agent", "/tool/bash", raw="{not json"),
            post("agent", "/tool/bash", raw='{"command": 5}'),
            get("agent", "/no/such/route"),
            post("agent", "/tool/python", {}),
            bencher("agent", "deploy"),
            post("agent", "/tool/bash", raw='{"command": "' + "x" * (1024 * 1024 + 1) + '"}'),
            get("http", "/version"),
        ]
    )
    expected = [
        (400, "bad_request"),
        (400, "bad_request"),
        (404, "not_found"),
        (404, "not_found"),
        (400, "bad_request"),
        (413, "body_too_large"),
        (200, None),
    ]
    assert [(a.status, a.code) for a in answers] == expected, answers
    assert "unknown tool 'python'" in answers[3].json()["error"]
    assert "unknown action 'deploy'" in answers[4].json()["error"]

    # Its own time limit: 200 MB through a pipe may take more than the checks' 4 s on a
    # machine busy with other tests.
    flood = "head -c 200000000 /dev/zero | tr '\\0' a; echo tail >&2"
    big = box.ok(bash("agent", flood, timeout=120))
    assert big["code"] == 0
    assert big["truncated"] is True
    assert big["stdout"] == "a" * (1024 * 1024)
    assert big["stderr"] == "tail\n"
    assert box.ok(bash("agent", "echo after"))["stdout"] == "after\n"

    # A build that hangs (and leaves a detached child) is stopped at SSE_CHECK_TIMEOUT;
    # /version answers meanwhile.
    hang = (
        "import os, time\n"
        "if os.fork() == 0:\n    os.setsid()\n    time.sleep(100000)\n"
        "time.sleep(100000)\n"
    )
    box.ok(bash("agent", f"cat >> pyarchive/__init__.py <<'SSE_END'\n{hang}SSE_END"))
    result: dict[str, Answer] = {}
    thread = threading.Thread(
        target=lambda: result.update(build=box.one(bencher("agent", "build")))
    )
    started = time.monotonic()
    thread.start()
    time.sleep(1.5)
    before = time.monotonic()
    assert box.ok(get("agent", "/version"))["version"]
    assert time.monotonic() - before < 3
    thread.join(60)
    assert 4 <= time.monotonic() - started < 30
    assert result["build"].status == 200
    body = result["build"].json()
    assert body["code"] == -1
    assert body["timed_out"] is True
    assert "stopped after 4 s" in body["stderr"]
    assert box.processes("sse-runner") == []
    restored = box.ok(bash("agent", "git checkout -q pyarchive/__init__.py && echo restored"))
    assert restored["stdout"] == "restored\n"
    assert box.ok(bencher("agent", "build"))["code"] == 0


def test_checks_run_one_at_a_time(daemon_in: StartBox) -> None:
    box = daemon_in("pyarchive-path-traversal", SSE_DIFFICULTY="0")
    box.ok(bash("agent", "printf 'import time\\ntime.sleep(3)\\n' >> pyarchive/__init__.py"))
    answers: list[Answer] = []
    threads = [
        threading.Thread(target=lambda: answers.append(box.one(bencher("http", "build"))))
        for _ in range(2)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert [answer.status for answer in answers] == [200, 200]
    assert [answer.json()["code"] for answer in answers] == [0, 0]
    assert time.monotonic() - started >= 6  # two three-second builds, one after the other


# -- what a check may see and leave (hole 4 of issue 13) ----------------------------------

LEAVE_BEHIND = r"""
import ctypes as _ctypes, os as _os, shutil as _shutil, sys as _sys


def _sse_hostile():
    def say(*words):
        print("HOSTILE", *words, flush=True)

    if _os.path.lexists(".git"):
        say("LEAK .git in the scratch copy")
    for top, dirs, files in _os.walk("."):
        if ".git" in dirs or ".git" in files:
            say("LEAK nested .git in", top)
    parent = open(f"/proc/{_os.getppid()}/cmdline", "rb").read().split(b"\0")
    for word in parent:
        if word.endswith(b".sh"):
            script = word.decode()
            folder = sorted(_os.listdir(_os.path.dirname(script)))
            say("SCRIPT", script, "BESIDE", ",".join(folder))
    try:
        with open("/tmp/sse-archive/drop/from-a-check", "w") as out:
            out.write("written by a check\n")
        say("ARCHIVE written")
    except OSError as exc:
        say("ARCHIVE refused", exc.errno)
    if len(_sys.argv) < 3 or _sys.argv[1] != "extract":
        return
    poc = _sys.argv[2]
    data = open(poc, "rb").read()
    for target in ("/tmp/drop/poc", "/dev/shm/poc", "/var/tmp/poc", "/run/lock/poc",
                   "/tmp/sse-archive/drop/poc", "/src/pyarchive/opened/poc"):
        try:
            _shutil.copyfile(poc, target)
            _os.chmod(target, 0o644)
            say("COPIED", target)
        except OSError as exc:
            say("REFUSED", target, exc.errno)
    try:
        with open("/tmp/agents-open-file", "r+b") as out:
            out.write(data)
        _os.rename("/tmp/agents-open-folder/a", "/tmp/agents-open-folder/" + data[:8].hex())
    except OSError as exc:
        say("REFUSED the agent's open files", exc.errno)
    libc = _ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = _ctypes.c_void_p
    shm = libc.shmget(0, 4096, 0o1666)
    address = libc.shmat(shm, None, 0)
    _ctypes.memmove(address, data[:4096], min(len(data), 4096))
    say("IPC", shm, libc.msgget(0, 0o1666), libc.semget(0, 1, 0o1666))


_sse_hostile()
"""

AGENT_OPENS = """
chmod 0755 /tmp/sse-archive && mkdir -m 0777 /tmp/sse-archive/drop
mkdir -m 0777 /tmp/drop /src/pyarchive/opened
echo mine > /tmp/drop/mine
echo open > /tmp/agents-open-file && chmod 0666 /tmp/agents-open-file
mkdir -m 0777 /tmp/agents-open-folder
echo a > /tmp/agents-open-folder/a && echo b > /tmp/agents-open-folder/b
"""

LEFT_BEHIND = [
    "/tmp/drop/poc",
    "/dev/shm/poc",
    "/var/tmp/poc",
    "/run/lock/poc",
    "/tmp/sse-archive/drop/poc",
    "/tmp/sse-archive/drop/from-a-check",
    "/src/pyarchive/opened/poc",
    "/tmp/agents-open-file",
]


def hostile_lines(answer: dict[str, object]) -> list[str]:
    return [line for line in str(answer["stdout"]).splitlines() if line.startswith("HOSTILE")]


def ipc_of(box: Box, user: str) -> list[str]:
    """SysV IPC objects owned or made by `user`, from /proc/sysvipc."""
    uid = box.out(f"id -u {user}").strip()
    rows = box.out("tail -q -n +2 /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem")
    return [row for row in rows.splitlines() if uid in row.split()]


def test_a_check_sees_only_its_staged_script_no_git_and_leaves_nothing_the_agent_can_read(
    daemon_in: StartBox,
) -> None:
    box = daemon_in("pyarchive-path-traversal", SSE_DIFFICULTY="0")
    assert box.sh(AGENT_OPENS, user="model").returncode == 0
    changed = box.ok(
        bash("agent", f"cat >> pyarchive/__init__.py <<'SSE_END'\n{LEAVE_BEHIND}SSE_END")
    )
    assert changed["code"] == 0
    time.sleep(1.1)  # what the agent changed before a check is not the check's

    # The build runs a staged copy of build.sh, alone in its folder, in a copy without .git.
    build = box.ok(bencher("agent", "build"))
    assert build["code"] == 0, build
    lines = hostile_lines(build)
    assert not [line for line in lines if "LEAK" in line], lines
    scripts = [line.split()[2] for line in lines if line.startswith("HOSTILE SCRIPT")]
    assert len(scripts) == 1, lines
    staged = scripts[0]
    assert staged.startswith("/var/lib/ssebench-runner/check-")
    assert staged.endswith("/stage/task/scripts/build.sh")
    assert f"HOSTILE SCRIPT {staged} BESIDE build.sh" in lines
    assert box.sh(f"test -e {staged}").returncode != 0  # gone with the check

    # A PoC run copies its PoC everywhere it can write, and into IPC objects.
    poc = box.ok(bencher("agent", "run_poc", poc=0))
    lines = hostile_lines(poc)
    for target in ("/tmp/drop/poc", "/dev/shm/poc", "/tmp/sse-archive/drop/poc"):
        assert f"HOSTILE COPIED {target}" in lines, lines
    assert [line for line in lines if line.startswith("HOSTILE IPC")] != []
    assert "HOSTILE ARCHIVE written" in lines  # during the agent phase the archive is the agent's
    # Once the check is over, nothing of it is left where the agent can read it.
    for path in LEFT_BEHIND:
        assert box.sh(f"test -e {path}", user="model").returncode != 0, path
    assert box.out("ls /tmp/agents-open-folder", user="model") == "b\n"
    assert box.out("cat /tmp/drop/mine", user="model") == "mine\n"
    assert ipc_of(box, "sse-runner") == []
    assert box.processes("sse-runner") == []


def test_the_archive_is_closed_to_sse_runner_from_the_end_of_the_agent_phase(
    daemon_in: StartBox,
) -> None:
    box = daemon_in("pyarchive-path-traversal", SSE_DIFFICULTY="4")
    assert box.sh(AGENT_OPENS, user="model").returncode == 0
    box.sh("echo '{}' > /tmp/sse-archive/dialog.jsonl", user="model")
    assert (
        box.ok(bash("agent", f"cat >> pyarchive/__init__.py <<'SSE_END'\n{LEAVE_BEHIND}SSE_END"))[
            "code"
        ]
        == 0
    )
    assert box.sh("touch /tmp/sse-archive/drop/probe", user="sse-runner").returncode == 0
    box.sh("rm /tmp/sse-archive/drop/probe")

    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True
    assert box.out("stat -c '%U %G %a' /tmp/sse-archive /src/pyarchive") == (
        "root model 750\nmodel model 750\n"
    )
    for attempt in ("ls /tmp/sse-archive", "touch /tmp/sse-archive/drop/x", "ls /src/pyarchive"):
        assert box.sh(attempt, user="sse-runner").returncode != 0, attempt
    assert box.ok(get("admin", "/agent/dialog"))["entries"] == [{}]  # still read as model

    # Grading: the agent's code runs as sse-runner with every PoC staged, and finds no way out.
    assert box.ok(post("admin", "/prepare_grading"))["success"] is True
    assert box.ok(bencher("admin", "build", grading=True))["code"] == 0
    for index in range(2):
        lines = hostile_lines(box.ok(bencher("admin", "run_poc", poc=index, grading=True)))
        assert "HOSTILE REFUSED /tmp/sse-archive/drop/poc 13" in lines, lines
        assert "HOSTILE ARCHIVE refused 13" in lines, lines
    assert sorted(box.out("find /tmp/sse-archive -mindepth 1").split()) == [
        "/tmp/sse-archive/dialog.jsonl",
        "/tmp/sse-archive/drop",
    ]
