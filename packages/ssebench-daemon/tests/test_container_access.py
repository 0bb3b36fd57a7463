"""The access matrix and the agent's boundaries, in real tool-image containers.

The daemon runs as root; the agent is `docker exec --user model`.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable

import pytest

from ssebench.daemon import ACTIONS, ALLOWED

from .boxes import ADMIN_SOCKET, AGENT_SOCKET, PYTHON, Box, Via, bash, bencher, get, post
from .conftest import StartBox

pytestmark = pytest.mark.docker

TASK = "pyarchive-path-traversal"
READ_ROUTES = ["/version", "/project", "/capabilities", "/diff", "/files", "/agent/dialog"]
ADMIN_ROUTES = [
    ("POST", "/prepare_grading"),
    ("POST", "/admin/agent_exited"),
    ("GET", "/reference/patch"),
]
AGENT_FACING: tuple[Via, ...] = ("agent", "http")


def check_reads(box: Box, via: Via) -> None:
    answers = box.send([get(via, path) for path in [*READ_ROUTES, "/result", "/final_diff"]])
    for path, answer in zip([*READ_ROUTES, "/result", "/final_diff"], answers, strict=True):
        if path == "/result":
            assert (answer.status, answer.code) == (404, "not_found"), answer
        elif path == "/final_diff":
            assert (answer.status, answer.code) == (409, "conflict"), answer
        else:
            assert answer.status == 200, (via, path, answer)


@pytest.mark.parametrize("difficulty", [0, 1, 2, 3, 4])
def test_every_route_on_every_listener_follows_the_access_matrix(
    daemon_in: StartBox, difficulty: int
) -> None:
    box = daemon_in(TASK, SSE_DIFFICULTY=str(difficulty))
    allowed = ALLOWED[difficulty]
    for via in AGENT_FACING:
        check_reads(box, via)
        assert box.ok(bash(via, "echo hello"))["stdout"] == "hello\n"
        answers = box.send([bencher(via, action, poc=0) for action in ACTIONS])
        for action, answer in zip(ACTIONS, answers, strict=True):
            if action in allowed:
                assert answer.status == 200, (via, action, answer)
                assert isinstance(answer.json()["code"], int)
            else:
                assert (answer.status, answer.code) == (403, "withheld"), (via, action, answer)
        for method, path in ADMIN_ROUTES:
            answer = box.one(post(via, path) if method == "POST" else get(via, path))
            assert (answer.status, answer.code) == (403, "admin_only"), (via, path, answer)
        answer = box.one(bencher(via, "build", grading=True))
        assert answer.status == 403, answer
        caps = box.ok(get(via, "/capabilities"))
        assert caps["can_build"] == ("build" in allowed)
        assert caps["can_run_poc"] == ("run_poc" in allowed)
        assert caps["poc_count"] == (2 if "run_poc" in allowed else 0)
        assert caps["has_function_test"] == ("function_test" in allowed)
        assert caps["has_intent_test"] == ("intent_test" in allowed)

    # The admin socket: never gated, and its own routes.
    check_reads(box, "admin")
    assert box.ok(bash("admin", "id -un"))["stdout"] == "model\n"
    for action in ACTIONS:
        assert isinstance(box.ok(bencher("admin", action, poc=0))["code"], int), action
    assert box.ok(get("admin", "/reference/patch"))["diff"].startswith("diff --git")

    # The agent phase ends: agent-facing listeners refuse every tool, on every route.
    box.sh("setsid sleep 1000 < /dev/null > /dev/null 2>&1 &", user="model")
    exited = box.ok(post("admin", "/admin/agent_exited"))
    assert exited["success"] is True
    assert exited["killed"] >= 1
    assert box.processes("model") == []
    for via in AGENT_FACING:
        answers = box.send(
            [
                bash(via, "true"),
                *(bencher(via, action) for action in ACTIONS),
                bencher(via, "nonsense"),
            ]
        )
        for answer in answers:
            assert (answer.status, answer.code) == (403, "agent_phase_over"), (via, answer)
        check_reads(box, via)
        for method, path in ADMIN_ROUTES:
            answer = box.one(post(via, path) if method == "POST" else get(via, path))
            assert answer.status == 403, (via, path, answer)
    # Idempotent; the admin socket keeps every tool.
    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True
    assert box.ok(bencher("admin", "build"))["code"] == 0
    assert box.ok(get("admin", "/reference/patch"))["diff"]


def test_the_agent_cannot_read_hidden_material_results_or_reach_the_admin_socket(
    daemon_in: StartBox,
) -> None:
    box = daemon_in(TASK, SSE_DIFFICULTY="0")
    box.ok(bencher("admin", "build"))  # leaves a log in the results directory
    assert "check-0001-build.log" in box.out("ls /var/lib/ssebench/results")
    hidden = [
        "/ssebench/config.yaml",
        "/ssebench/diffs/patch.diff",
        "/ssebench/diffs/test.diff",
        "/ssebench/pocs/dotdot-escape.zip",
        "/ssebench/reports/path-traversal.txt",
        "/ssebench/scripts/run.sh",
        "/var/lib/ssebench/results/check-0001-build.log",
    ]
    listed = [
        "/ssebench",
        "/ssebench-repo",
        "/var/lib/ssebench/results",
        "/var/lib/ssebench-runner",
        "/run/ssebench",
    ]
    connect_admin = (
        f"{PYTHON} -I -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{ADMIN_SOCKET}\")'"
    )
    attempts = [
        *(f"cat {path}" for path in hidden),
        *(f"ls {path}" for path in listed),
        "cat /ssebench-repo/pyarchive/_archive.py",
        connect_admin,
        f"mv {AGENT_SOCKET} /tmp/moved.sock",
        f"rm -f {AGENT_SOCKET}",
        f"mv {ADMIN_SOCKET} /tmp/moved-admin.sock",
        "touch /var/lib/ssebench/results/result.json",
    ]
    # Directly as model (docker exec), then through the bash tool, which must be the same.
    for attempt in attempts:
        done = box.sh(attempt, user="model")
        assert done.returncode != 0, (attempt, done.stdout)
    answers = box.send([bash("agent", attempt) for attempt in attempts])
    for attempt, answer in zip(attempts, answers, strict=True):
        assert answer.status == 200
        assert answer.json()["code"] != 0, (attempt, answer.json())
    # Every file of the hidden material, the graded copy and the results, one by one.
    every = box.out("find /ssebench /ssebench-repo /var/lib/ssebench -type f").split("\n")
    assert len([path for path in every if path]) > 20
    readable = box.sh(
        'while IFS= read -r f; do [ -z "$f" ] || ! head -c1 "$f" >/dev/null 2>&1 || echo "$f"; '
        "done <<'SSE_END'\n" + "\n".join(every) + "\nSSE_END",
        user="model",
    )
    assert readable.stdout == b"", readable.stdout
    # The probe itself works on what model may read. (Whether sse-runner may read the
    # scripts outside a check depends on the image: checks run staged copies either way.)
    assert box.sh("head -c1 /src/pyarchive/README.md", user="model").stdout == b"#"
    assert box.out(f"stat -c '%U %a' {AGENT_SOCKET} {ADMIN_SOCKET}") == "root 666\nroot 600\n"
    assert box.out("stat -c '%U %a' /run/ssebench") == "root 700\n"
    assert box.ok(get("agent", "/version"))["version"]

    identity = box.ok(bash("agent", "id -u; id -g; id -G; echo $HOME; echo $USER; pwd"))
    assert identity["stdout"] == "1000\n1000\n1000\n/home/model\nmodel\n/src/pyarchive\n"
    env = box.ok(bash("agent", "env; cat /proc/$$/environ | tr '\\0' '\\n'"))["stdout"]
    assert "admin.sock" not in env
    assert "/run/ssebench" not in env
    assert "/opt/ssebench" not in env
    assert f"SSE_DAEMON_SOCKET={AGENT_SOCKET}" in env
    status = box.ok(
        bash("agent", "grep -E '^(Uid|Gid|Groups|CapEff|CapPrm|NoNewPrivs)' /proc/self/status")
    )
    lines = dict(line.split(":", 1) for line in status["stdout"].splitlines())
    assert lines["Uid"].split() == ["1000"] * 4
    assert lines["Gid"].split() == ["1000"] * 4
    assert lines["Groups"].split() == []
    assert int(lines["CapEff"], 16) == 0
    assert int(lines["CapPrm"], 16) == 0


def test_version_and_capabilities_answer_on_the_http_port(daemon_in: StartBox) -> None:
    box = daemon_in(TASK)  # SSE_DIFFICULTY unset: 2
    caps = box.ok(get("http", "/capabilities"))
    assert caps == {
        "can_build": True,
        "can_run_poc": False,
        "poc_count": 0,
        "has_function_test": True,
        "has_intent_test": False,
    }
    project = box.ok(get("http", "/project"))
    assert set(project) == {"id", "project", "language", "source", "task_description", "scripts"}
    assert project["source"] == "/src/pyarchive"
    assert "zip slip" in project["task_description"]["issue"]
    assert project["task_description"]["crash_report"][0].strip()
    text = box.one(get("http", "/project")).body
    # Never files.*, the run script, the references (the crash report may name a PoC).
    for secret in (
        "diffs/",
        "future_test",
        "scripts/run.sh",
        'sandbox=\\"$PWD',
        "snyk",
        "cwe.mitre",
    ):
        assert secret not in text


def test_the_dialog_is_read_as_model_from_since_on(daemon_in: StartBox) -> None:
    box = daemon_in(TASK)
    box.sh(
        "printf '%s\\n' '{\"n\": 0}' '{\"n\": 1}' 'not json' '' '{\"n\": 3}' "
        "> /tmp/sse-archive/dialog.jsonl",
        user="model",
    )
    assert box.ok(get("agent", "/agent/dialog")) == {
        "entries": [{"n": 0}, {"n": 1}, "not json", {"n": 3}],
        "next": 4,
    }
    assert box.ok(get("http", "/agent/dialog?since=3")) == {"entries": [{"n": 3}], "next": 4}
    assert box.ok(get("agent", "/agent/dialog?since=9")) == {"entries": [], "next": 4}
    # A link planted to hidden material is read with model's permissions: nothing leaks.
    box.sh("ln -sf /ssebench/config.yaml /tmp/sse-archive/dialog.jsonl", user="model")
    answer = box.one(get("agent", "/agent/dialog"))
    assert (answer.status, answer.code) == (409, "conflict"), answer
    assert "pyarchive" not in answer.body
    assert box.ok(get("agent", "/version"))


@pytest.mark.parametrize(
    ("setup", "env", "message"),
    [
        ("true", "SSE_DIFFICULTY=5", "SSE_DIFFICULTY='5' is not a difficulty"),
        ("true", "SSE_DIFFICULTY=hard", "SSE_DIFFICULTY='hard' is not a difficulty"),
        (
            "sed -i '/^sse-runner:/d' /etc/passwd",
            "SSE_DIFFICULTY=2",
            "'sse-runner' account is missing",
        ),
    ],
)
def test_the_daemon_refuses_to_start_with_a_clear_message(
    tool_image: Callable[..., str], setup: str, env: str, message: str
) -> None:
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-e", env, "--entrypoint", "bash",
         tool_image(TASK), "-c", f"{setup} && exec {PYTHON} -m ssebench.daemon"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert "refusing to start" in done.stderr
    assert message in done.stderr


def test_the_daemon_never_imports_from_the_folder_it_was_started_in(
    tool_image: Callable[..., str],
) -> None:
    # Started without -I from the source tree (the image's working directory), where
    # modules named like the daemon's dependencies were planted.
    plant = "; ".join(
        f'printf \'open("/tmp/imported-{name}", "w").close()\\n\' > /src/pyarchive/{name}.py'
        for name in ("uvicorn", "starlette", "msgspec", "h11", "yaml")
    )
    box_name = f"ssebench-test-daemon-cwd-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["docker", "run", "-d", "--init", "--network", "none", "--name", box_name,
         "--entrypoint", "bash", "-w", "/src/pyarchive", tool_image(TASK),
         "-c", f"{plant}; exec {PYTHON} -m ssebench.daemon"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    box = Box(name=box_name, image=tool_image(TASK))
    try:
        for _ in range(300):
            if box.exec(["test", "-S", ADMIN_SOCKET]).returncode == 0:
                break
            time.sleep(0.1)
        assert box.ok(get("agent", "/version"))["version"], box.logs()
        assert box.ok(bash("agent", "ls /src/pyarchive/uvicorn.py"))["code"] == 0
        assert box.out("ls /tmp | grep -c imported- || true") == "0\n"
    finally:
        box.remove()
