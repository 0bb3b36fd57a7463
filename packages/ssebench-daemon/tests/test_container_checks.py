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
# Committed by the agent and run by the Makefile at every build.
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G) user=$(id -un)"
cat /ssebench/diffs/patch.diff 2>/dev/null && echo "LEAK: read the reference patch"
cat /ssebench/config.yaml 2>/dev/null && echo "LEAK: read the task config"
ls /ssebench-repo 2>/dev/null && echo "LEAK: listed /ssebench-repo"
ls /var/lib/ssebench/results 2>/dev/null && echo "LEAK: listed the results"
echo '{"patch_result": {}}' > /var/lib/ssebench/results/result.json 2>/dev/null \
  && echo "LEAK: wrote result.json"
touch /src/tlvkit/planted 2>/dev/null && echo "LEAK: wrote into the agent's tree"
touch /ssebench-repo/planted 2>/dev/null && echo "LEAK: wrote into /ssebench-repo"
ls /var/lib/ssebench-runner 2>/dev/null && echo "LEAK: listed the scratch directory"
echo left-behind > /tmp/runner-file
setsid bash -c 'while :; do date +%N >> /tmp/heartbeat; sleep 0.1; done' <&- >&- 2>&- &
( setsid sleep 100000 </dev/null >/dev/null 2>&1 & )
echo "spawned"
"""

MAKEFILE_HOOK = "all: hostile\n\n.PHONY: hostile\nhostile:\n\tbash ./hostile.sh\n\n"


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
    assert box.sh("test -e /src/tlvkit/planted || test -e /ssebench-repo/planted").returncode != 0
    assert box.sh("test -e /tmp/runner-file").returncode != 0
    # Nothing is still writing the heartbeat (the sweep removed it).
    time.sleep(0.5)
    assert box.sh("test -e /tmp/heartbeat").returncode != 0


def test_a_hostile_build_runs_as_sse_runner_and_nothing_of_it_survives_the_check(
    daemon_in: StartBox,
) -> None:
    box = daemon_in("tlvkit-heap-overflow", SSE_DIFFICULTY="0")
    runner_uid = box.out("id -u sse-runner").strip()
    commit = (
        f"cat > hostile.sh <<'SSE_END'\n{HOSTILE}SSE_END\n"
        f"cat - Makefile > Makefile.new <<'SSE_END'\n{MAKEFILE_HOOK}SSE_END\n"
        "mv Makefile.new Makefile && git add -A && "
        "git -c user.name=a -c user.email=a@a commit -q -m 'build tweak' && "
        "git log --oneline | wc -l"
    )
    committed = box.ok(bash("agent", commit))
    assert committed["code"] == 0, committed
    assert committed["stdout"] == "2\n"
    assert box.out("cat /src/tlvkit/hostile.sh", user="model") == HOSTILE

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
printf '\0\1\2binary\377' > tests/blob.dat
chmod +x tests/test_archive.py
ln -s pyarchive/_archive.py link-to-archive
ln -s /etc/passwd absolute-link
printf 'space\n' > 'with space.txt'
printf 'newline\n' > "$(printf 'with\nnewline.txt')"
rm pyproject.toml
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
        "link-to-archive": "added",
        "pyproject.toml": "deleted",
        "tests/blob.dat": "added",
        "tests/test_archive.py": "modified",
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

    big = box.ok(bash("agent", "head -c 200000000 /dev/zero | tr '\\0' a; echo tail >&2"))
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
