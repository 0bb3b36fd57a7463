"""Whole runs in real tool-image containers: the image's entrypoint, our own agent commands.

Each test starts a demo task's tool layer the way the Docker backend does
(the run directory bind-mounted at SSE_RESULTS, its `archive/` at
SSE_ARCHIVE, the agent command as the container's command) and reads the
grade the entrypoint leaves in the run directory. The run directory belongs
to a made-up host user, so handing the results over is visible.
"""

from __future__ import annotations

import contextlib
import json
import os
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import docker.types
import pytest
from docker.models.containers import Container

from ssebench.spec import PatchResult, Result, contract, read_json

pytestmark = pytest.mark.docker

HOME = Path(__file__).resolve().parents[3]
DEMO = HOME / "datasets" / "demo"
TLVKIT = "tlvkit-heap-overflow"
PYARCHIVE = "pyarchive-path-traversal"
DEMO_TASKS = (TLVKIT, PYARCHIVE)
HOST_UID = 4321
"""The owner of the run directory on the host (anyone but root and `model`)."""
LABEL = "ssebench-test.entrypoint"

PROCESSES_OF_MODEL = r"""
import os
found = []
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        status = open(f"/proc/{pid}/status").read()
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
    except OSError:
        continue
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields["State"].split()[0] in ("Z", "X"):
        continue
    if "1000" in fields["Uid"].split():
        found.append(f"{pid} {cmd}")
print("\n".join(found))
"""

FILE_FACTS = r"""
import hashlib, json, os, sys
facts = {}
for path in sys.argv[1:]:
    info = os.lstat(path)
    facts[path] = [info.st_uid, info.st_gid, oct(info.st_mode),
                   hashlib.sha256(open(path, "rb").read()).hexdigest()]
print(json.dumps(facts))
"""

MCP_CLIENT = r"""
import asyncio, sys
from mcp import Client

async def main(out):
    async with Client("http://127.0.0.1:3000/mcp", read_timeout_seconds=600) as client:
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == ["test_patch"], tools
        result = await client.call_tool("test_patch", {})
    text = "".join(getattr(block, "text", "") for block in result.content)
    with open(out, "w") as f:
        f.write(("TOOL ERROR\n" if result.is_error else "") + text)

asyncio.run(main(sys.argv[1]))
"""


@dataclass
class Run:
    """One container run and its run directory on the host."""

    container: Container
    run_dir: Path

    @property
    def archive(self) -> Path:
        return self.run_dir / "archive"

    def wait(self, timeout: float = 600) -> int:
        return int(self.container.wait(timeout=timeout)["StatusCode"])

    def output(self) -> str:
        return bytes(self.container.logs(stdout=True, stderr=True)).decode(errors="replace")

    def result(self) -> Result:
        return read_json(self.run_dir / "result.json", Result)

    def graded(self) -> bool:
        return (self.run_dir / contract.GRADED_MARKER).exists()

    def exec(self, argv: list[str], user: str = "root") -> str:
        code, out = self.container.exec_run(argv, user=user)
        text = bytes(out).decode(errors="replace")
        assert code == 0, text
        return text

    def python(self, script: str, *args: str) -> str:
        return self.exec([contract.RUNTIME_PYTHON, "-I", "-c", script, *args])


Start = Callable[..., Run]


@pytest.fixture
def start(
    docker_client: docker.DockerClient, tool_image: Callable[..., str], tmp_path: Path
) -> Iterator[Start]:
    """`start(task, script, difficulty=2, timeout=300, keep_alive=False, reference=False,
    env=None)`; `env` adds to the contract's variables."""
    runs: list[Run] = []

    def launch(
        task: str,
        script: str,
        *,
        difficulty: str = "2",
        timeout: float = 300,
        keep_alive: bool = False,
        reference: bool = False,
        env: dict[str, str] | None = None,
    ) -> Run:
        run_dir = tmp_path / f"run-{len(runs)}"
        (run_dir / "archive").mkdir(parents=True)
        (run_dir / "result.json").touch()
        for path in (run_dir, run_dir / "archive", run_dir / "result.json"):
            os.chown(path, HOST_UID, HOST_UID)
        mounts = [
            docker.types.Mount(contract.RESULTS_DIR, str(run_dir), type="bind"),
            docker.types.Mount(contract.ARCHIVE_DIR, str(run_dir / "archive"), type="bind"),
        ]
        if reference:
            patch = DEMO / task / "sse" / "diffs" / "patch.diff"
            mounts.append(
                docker.types.Mount(
                    contract.REFERENCE_PATCH, str(patch), type="bind", read_only=True
                )
            )
        container = docker_client.containers.run(
            tool_image(task),
            ["/bin/bash", "-c", textwrap.dedent(script)],
            detach=True,
            name=f"sse-ep-test-{uuid.uuid4().hex[:10]}",
            labels={LABEL: "1"},
            environment={
                contract.ENV_API_KEY: "sk-test-not-a-secret",
                contract.ENV_BASE_URL: "http://proxy.invalid",
                contract.ENV_MODEL_NAME: "test-model",
                contract.ENV_RESULTS: contract.RESULTS_DIR,
                contract.ENV_ARCHIVE: contract.ARCHIVE_DIR,
                contract.ENV_DIFFICULTY: difficulty,
                contract.ENV_TIMEOUT: f"{timeout:g}",
                contract.ENV_KEEP_ALIVE: "1" if keep_alive else "0",
                **(env or {}),
            },
            mounts=mounts,
            network_mode="none",
            security_opt=["no-new-privileges"],
        )
        run = Run(container=container, run_dir=run_dir)
        runs.append(run)
        return run

    yield launch
    for run in runs:
        with contextlib.suppress(docker.errors.NotFound):
            run.container.remove(force=True)


def wait_for(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def pocs_of(task: str) -> int:
    text = (DEMO / task / "sse" / "config.yaml").read_text()
    return text.split("poc:", 1)[1].split("future_test:", 1)[0].count("\n    - ")


def assert_handed_over(run: Run) -> None:
    """Every file of the run directory (archive included) belongs to the host user."""
    for path in [run.run_dir, *run.run_dir.rglob("*")]:
        info = os.lstat(path)
        assert (info.st_uid, info.st_gid) == (HOST_UID, HOST_UID), path


# -- grades -----------------------------------------------------------------------------


@pytest.mark.parametrize("task", DEMO_TASKS)
def test_an_agent_that_applies_the_reference_fix_passes_every_check(
    start: Start, task: str
) -> None:
    run = start(task, "git apply /reference/patch.diff && echo 'fix applied'", reference=True)
    assert run.wait() == 0, run.output()
    result = run.result()
    total = pocs_of(task)
    assert result.patch_result == PatchResult(
        status="passed",
        build_success=True,
        pov_passed=total,
        pov_total=total,
        func_test_success=True,
        intent_test_success=True,
        error_msg=None,
        error_log=None,
    )
    runtime = result.runtime_result
    assert runtime.agent_exit_code == 0
    assert runtime.agent_timeout is False and runtime.evaluator_timeout is False
    assert runtime.agent_duration is not None and 0 <= runtime.agent_duration < 60
    assert result.config is None
    assert (run.run_dir / ".graded").read_text() == "passed\n"
    assert "fix applied" in run.output() and "fix applied" in read(run.run_dir / "agent.log")
    reference = (DEMO / task / "sse" / "diffs" / "patch.diff").read_text()
    added = [line for line in reference.splitlines() if line.startswith("+ ")]
    final = read(run.run_dir / "final.patch")
    assert added and all(line in final for line in added)
    for name in ("source.tar.gz", "daemon.log", "mcp.log", "evaluator.log", "entrypoint.log"):
        assert (run.run_dir / name).is_file(), name
    assert_handed_over(run)


@pytest.mark.parametrize("task", DEMO_TASKS)
def test_an_agent_that_changes_nothing_fails_with_every_poc_still_triggering(
    start: Start, task: str
) -> None:
    run = start(task, "echo looking; ls > /dev/null")
    assert run.wait() == 0, run.output()
    patch = run.result().patch_result
    assert patch.status == "failed"
    assert patch.build_success is True
    assert patch.func_test_success is True
    assert patch.pov_passed == 0 and patch.pov_total == pocs_of(task)
    assert patch.intent_test_success is False
    assert (patch.error_msg or "").startswith(f"PoC 1 of {pocs_of(task)} still triggers the bug")
    assert patch.error_log
    assert (run.run_dir / ".graded").read_text() == "failed\n"
    assert_handed_over(run)


def test_an_agent_past_its_time_limit_exits_124_and_is_graded_anyway(start: Start) -> None:
    run = start(TLVKIT, "echo started; sleep 600", timeout=3)
    began = time.monotonic()
    assert run.wait() == 124, run.output()
    assert time.monotonic() - began < 120
    result = run.result()
    assert result.runtime_result.agent_timeout is True
    assert result.runtime_result.agent_exit_code == 124
    assert 2.5 <= (result.runtime_result.agent_duration or 0) < 20
    assert result.patch_result.status == "failed"
    assert result.patch_result.build_success is True
    assert run.graded()


def test_nothing_the_agent_leaves_running_survives_the_agent_phase(start: Start) -> None:
    run = start(
        TLVKIT,
        """
        beat() { while :; do date +%s%N > "$SSE_ARCHIVE/beat-$1"; sleep 0.1; done; }
        beat plain &
        setsid bash -c "$(declare -f beat); beat setsid" &
        (setsid bash -c "trap '' TERM HUP INT; $(declare -f beat); beat double" &) &
        nohup bash -c "$(declare -f beat); beat nohup" > /dev/null 2>&1 &
        sleep 1
        echo "left four behind"
        """,
        keep_alive=True,
    )
    wait_for(run.graded, 300, "the grade")
    assert run.python(PROCESSES_OF_MODEL).strip() == ""
    beats = {path.name: path.read_text() for path in run.archive.glob("beat-*")}
    assert sorted(beats) == ["beat-double", "beat-nohup", "beat-plain", "beat-setsid"]
    time.sleep(0.5)
    assert {path.name: path.read_text() for path in run.archive.glob("beat-*")} == beats
    assert run.result().patch_result.status == "failed"
    run.container.stop(timeout=20)
    assert run.wait(60) == 143


HANG_ON_TRAVERSAL = """\
python3 - <<'PY'
import pathlib
path = pathlib.Path("pyarchive/_archive.py")
code = path.read_text()
anchor = "            target = os.path.join(dest, info.filename)\\n"
assert anchor in code
hang = (
    "            if '..' in info.filename:\\n"
    "                import time\\n"
    "                time.sleep(3600)  # a 'fix' that never returns\\n"
)
path.write_text(code.replace(anchor, hang + anchor, 1))
PY
echo 'patched'
"""


def test_a_patch_that_makes_a_poc_hang_is_failed_with_the_reason_not_an_error(
    start: Start,
) -> None:
    # Every PoC of the task (and the hidden tests) extract a traversing archive: with
    # this patch each hangs until the daemon stops it at its limit. The grade must
    # say so as failing checks, and every check must still run.
    run = start(PYARCHIVE, HANG_ON_TRAVERSAL, timeout=30, env={"SSE_CHECK_TIMEOUT": "6"})
    began = time.monotonic()
    assert run.wait(300) == 0, run.output()
    assert time.monotonic() - began < 240
    assert "patched" in run.output()
    result = run.result()
    patch = result.patch_result
    assert patch.status == "failed", (patch.error_msg, patch.error_log)
    assert result.runtime_result.evaluator_timeout is False
    assert patch.build_success is True
    assert (patch.pov_passed, patch.pov_total) == (0, pocs_of(PYARCHIVE))
    assert patch.func_test_success is True
    assert patch.intent_test_success is False
    assert patch.error_msg == (
        f"PoC 1 of {pocs_of(PYARCHIVE)} did not finish within 6 s (run.sh was stopped)"
    )
    assert "check stopped after 6 s" in (patch.error_log or "")
    evaluator_log = read(run.run_dir / "evaluator.log")
    assert "intent_test: code -1, stopped at its limit of 6 s" in evaluator_log
    assert (run.run_dir / ".graded").read_text() == "failed\n"


COPY_POC_OUT = """
import os as _os, shutil as _shutil, sys as _sys
if len(_sys.argv) > 2 and _sys.argv[1] == "extract":
    for _folder in ("/tmp/sse-archive/drop", "/tmp/sse-archive"):
        try:
            _shutil.copyfile(_sys.argv[2], _folder + "/" + _os.path.basename(_sys.argv[2]))
        except OSError:
            pass
"""


def test_grading_checks_cannot_leave_hidden_material_in_the_archive(start: Start) -> None:
    # The agent opens a folder of its archive to everyone and plants code that every
    # PoC run (as sse-runner, with the PoC staged) uses to copy the PoC out.
    script = (
        'mkdir -m 0777 "$SSE_ARCHIVE/drop" && chmod 0777 "$SSE_ARCHIVE"\n'
        f"cat >> pyarchive/__init__.py <<'SSE_END'\n{COPY_POC_OUT}SSE_END\n"
    )
    run = start(PYARCHIVE, script, difficulty="4")
    assert run.wait() == 0, run.output()
    patch = run.result().patch_result
    assert patch.status == "failed" and patch.pov_total == pocs_of(PYARCHIVE)
    assert sorted(path.name for path in run.archive.rglob("*")) == ["drop"]
    assert_handed_over(run)
    assert run.archive.stat().st_mode & 0o777 == 0o750


# -- stopping ---------------------------------------------------------------------------


def test_docker_stop_during_the_agent_phase_exits_143_with_an_error_grade(start: Start) -> None:
    run = start(TLVKIT, "echo running; sleep 600")
    wait_for(lambda: "running" in read(run.run_dir / "agent.log"), 120, "the agent")
    began = time.monotonic()
    run.container.stop(timeout=contract.STOP_GRACE)
    assert run.wait(60) == 143, run.output()
    assert time.monotonic() - began < contract.STOP_GRACE
    patch = run.result().patch_result
    assert patch.status == "error"
    assert patch.error_msg == "the run was stopped by SIGTERM during the agent phase"
    assert patch.build_success is None and patch.pov_total is None
    assert (run.run_dir / ".graded").read_text() == "error\n"
    assert "stopped by SIGTERM during the agent phase" in run.output()
    assert_handed_over(run)


# -- links the agent plants ---------------------------------------------------------------


def test_links_planted_in_the_archive_are_never_followed(
    start: Start, tool_image: Callable[..., str], docker_client: docker.DockerClient
) -> None:
    targets = ["/etc/passwd", "/etc/shadow", "/etc/group"]
    pristine = docker_client.containers.run(
        tool_image(TLVKIT),
        ["-I", "-c", FILE_FACTS, *targets],
        entrypoint=contract.RUNTIME_PYTHON,
        remove=True,
        network_mode="none",
    )
    run = start(
        TLVKIT,
        f"""
        ln -s /etc/passwd "$SSE_ARCHIVE/passwd-link"
        ln -s /etc/shadow "$SSE_ARCHIVE/shadow-link"
        ln -s {contract.RESULTS_DIR}/result.json "$SSE_ARCHIVE/result-link"
        ln -s ../result.json "$SSE_ARCHIVE/relative-result-link"
        ln -s /etc "$SSE_ARCHIVE/etc-link"
        mkdir "$SSE_ARCHIVE/deep" && ln -s /etc/group "$SSE_ARCHIVE/deep/group-link"
        echo '{{"role": "agent"}}' > "$SSE_ARCHIVE/dialog.jsonl"
        """,
        keep_alive=True,
    )
    wait_for(run.graded, 300, "the grade")
    after = run.python(FILE_FACTS, *targets)
    assert json.loads(after) == json.loads(bytes(pristine).decode())
    assert run.result().patch_result.status == "failed", "result.json is a whole grade"
    links = {
        "passwd-link": "/etc/passwd",
        "shadow-link": "/etc/shadow",
        "result-link": f"{contract.RESULTS_DIR}/result.json",
        "relative-result-link": "../result.json",
        "etc-link": "/etc",
        "deep/group-link": "/etc/group",
    }
    # No link reaches the host's run directory: each is removed and named in entrypoint.log.
    log = (run.run_dir / "entrypoint.log").read_text()
    for name, target in links.items():
        assert not os.path.lexists(run.archive / name), name
        assert f"{name} (a link to {target})" in log
    assert sorted(path.name for path in run.archive.iterdir()) == ["deep", "dialog.jsonl"]
    assert_handed_over(run)
    etc = run.python("import os; i = os.stat('/etc'); print(i.st_uid, i.st_gid, oct(i.st_mode))")
    assert etc.split() == ["0", "0", "0o40755"]
    run.container.stop(timeout=20)


# Modules the entrypoint, evaluator, daemon or MCP server might import after the agent ran.
SHADOWED = (
    "msgspec", "yaml", "tarfile", "gzip", "zlib", "traceback", "json", "decimal", "uuid",
    "typing_extensions", "annotated_types", "pydantic", "importlib_metadata", "shutil",
    "tempfile", "secrets", "hashlib", "base64", "email", "http", "ctypes", "asyncio",
)  # fmt: skip


def test_modules_the_agent_plants_in_its_tree_are_never_imported_by_root(start: Start) -> None:
    planted = "\n".join(
        f"cat > {name}.py <<'EOF'\n"
        f"open('{contract.ARCHIVE_DIR}/PWNED-{name}-' + str(__import__('os').getuid()), 'w')\n"
        "EOF"
        for name in SHADOWED
    )
    run = start(
        TLVKIT, f"{planted}\nmkdir -p ssebench/spec && cp json.py ssebench/spec/__init__.py"
    )
    assert run.wait() == 0, run.output()
    assert sorted(path.name for path in run.archive.glob("PWNED-*")) == []
    assert run.result().patch_result.status == "failed"
    assert run.graded()


# -- the MCP server ---------------------------------------------------------------------

MCP_AGENT = f"""
set -e
cat > /tmp/mcp_client.py <<'EOF'
{MCP_CLIENT}
EOF
{contract.RUNTIME_PYTHON} -I /tmp/mcp_client.py "$SSE_ARCHIVE/before.txt"
git apply /reference/patch.diff
{contract.RUNTIME_PYTHON} -I /tmp/mcp_client.py "$SSE_ARCHIVE/after.txt"
"""


@pytest.mark.parametrize("difficulty", ["0", "2", "4"])
def test_the_sdk_client_calls_test_patch_inside_the_container(
    start: Start, difficulty: str
) -> None:
    run = start(TLVKIT, MCP_AGENT, difficulty=difficulty, reference=True)
    assert run.wait() == 0, run.output()
    before = read(run.archive / "before.txt")
    after = read(run.archive / "after.txt")
    if difficulty == "0":
        assert before.startswith("test_patch: FAILED"), before
        assert "- build: PASSED" in before
        assert "- PoC 1 of 2: FAILED (the bug still triggers" in before
        assert "- PoC 2 of 2: NOT RUN" in before
        assert "- intent tests: FAILED" in before
        assert "- function tests: PASSED" in before
        assert "AddressSanitizer" in before
        assert after.startswith("test_patch: PASSED: all 5 checks that ran passed."), after
    elif difficulty == "2":
        # The build and the project's tests cannot tell the bug from the fix.
        for answer in (before, after):
            assert answer.startswith("test_patch: PASSED: all 2 checks that ran passed."), answer
            assert "not available at difficulty 2: intent tests, proofs of concept" in answer
            assert "PoC" not in answer
    else:
        for answer in (before, after):
            assert answer.startswith("NOTHING CHECKED"), answer
            assert "nothing may be checked" in answer
    assert run.result().patch_result.status == "passed"
    output = run.output()
    assert output.index("MCP server listening after") < output.index("agent started after")
    # The SDK loaded only for the agent's first call.
    mcp_log = (run.run_dir / "mcp.log").read_text()
    assert mcp_log.index("listening on") < mcp_log.index("first client after")


# -- services that do not start ---------------------------------------------------------


def test_a_bad_difficulty_ends_the_run_promptly_with_a_clear_error(start: Start) -> None:
    run = start(TLVKIT, 'echo ran > "$SSE_ARCHIVE/ran"', difficulty="9")
    began = time.monotonic()
    assert run.wait(120) == 2, run.output()
    assert time.monotonic() - began < 30
    assert not (run.archive / "ran").exists(), "the agent must not run"
    patch = run.result().patch_result
    assert patch.status == "error"
    assert "exited with status 2 before it answered" in (patch.error_msg or "")
    assert "SSE_DIFFICULTY='9' is not a difficulty" in (patch.error_log or "")
    assert "SSE_DIFFICULTY='9' is not a difficulty" in run.output()
    assert run.graded()
    assert_handed_over(run)
