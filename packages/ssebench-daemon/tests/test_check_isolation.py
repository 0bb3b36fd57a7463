"""What a check sees of /ssebench and of the project, over the real wire (fake privileges)."""

from __future__ import annotations

import httpx
import pytest

from .conftest import Running
from .fakes import write_script

pytestmark = pytest.mark.process

SHOW_BUILD = """\
#!/bin/bash
echo "script=$0"
ls "$(dirname "$0")"
cat "$(dirname "$0")/helper.txt"
find . -name .git
cp lib.txt built.txt
echo "built $(cat built.txt)"
"""

SHOW_RUN = """\
#!/bin/bash
echo "script=$0 poc=$1"
ls "$(dirname "$0")"
cat "$1"
"""


def bencher(client: httpx.Client, action: str, **body: object) -> dict[str, object]:
    response = client.post("/tool/bencher", params={"action": action}, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, object] = response.json()
    return result


def lines(result: dict[str, object]) -> list[str]:
    return str(result["stdout"]).splitlines()


def test_a_check_runs_a_staged_copy_of_its_script_beside_its_support_files_only(
    running: Running,
) -> None:
    task_dir, scratch = running.config.task_dir, running.config.scratch_dir
    write_script(task_dir / "scripts" / "build.sh", SHOW_BUILD)
    write_script(task_dir / "scripts" / "run.sh", SHOW_RUN)
    (task_dir / "scripts" / "helper.txt").write_text("a support file\n")

    build = bencher(running.agent, "build")
    assert build["code"] == 0, build
    staged = scratch / "check-0001" / "stage" / "task" / "scripts"
    assert lines(build)[:4] == [
        f"script={staged}/build.sh",
        "build.sh",  # never run.sh or test.sh
        "helper.txt",
        "a support file",
    ]
    assert not (scratch / "check-0001" / "stage").exists()  # the copy stays, the stage goes
    assert (scratch / "check-0001" / "src" / "built.txt").exists()

    poc = bencher(running.agent, "run_poc", poc=0)
    staged = scratch / "check-0002" / "stage"
    assert lines(poc) == [
        f"script={staged}/task/scripts/run.sh poc={staged}/poc-0/pocs/first.txt",
        "helper.txt",
        "run.sh",
        "POC-ONE",
    ]
    assert not (scratch / "check-0002").exists()


SHOW_POC_FOLDER = """\
#!/bin/bash
cd "$(dirname "$1")"
ls
cat helper.go
"""


def test_a_poc_is_staged_with_its_folder_but_never_beside_another_poc(running: Running) -> None:
    task_dir, scratch = running.config.task_dir, running.config.scratch_dir
    write_script(task_dir / "scripts" / "run.sh", SHOW_POC_FOLDER)
    (task_dir / "pocs" / "helper.go").write_text("package helper\n")
    (task_dir / "pocs" / "go.mod").write_text("module poc\n")
    assert bencher(running.agent, "build")["code"] == 0

    both = bencher(running.agent, "run_poc")

    assert both["code"] == 0, both
    # Each PoC sees its folder's other files, never the other PoC (named in the config).
    once = ["go.mod", "helper.go", "package helper"]
    assert lines(both) == [
        "== PoC 0 ==",
        "first.txt",
        *once,
        "== PoC 1 ==",
        *once[:2],
        "second.txt",
        once[2],
    ]
    assert not (scratch / "check-0002").exists()


def test_a_task_script_that_cannot_be_staged_is_a_failed_check_not_a_daemon_error(
    running: Running,
) -> None:
    (running.config.task_dir / "scripts" / "test.sh").unlink()
    result = bencher(running.agent, "function_test")
    assert result["code"] == -1
    assert "cannot stage" in str(result["stderr"])
    assert bencher(running.agent, "build")["code"] == 0


def test_no_scratch_copy_carries_git_and_the_agents_diff_still_applies(running: Running) -> None:
    repo = running.config.repo_dir
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "tests" / ".git").write_text("gitdir: ../.git/modules/tests\n")
    write_script(running.config.task_dir / "scripts" / "build.sh", SHOW_BUILD)
    (running.config.task_dir / "scripts" / "helper.txt").write_text("help\n")
    changed = running.agent.post("/tool/bash", json={"command": "printf 'fixed\\n' > lib.txt"})
    assert changed.json()["code"] == 0
    for grading in (False, True):
        client = running.admin if grading else running.agent
        build = bencher(client, "build", grading=grading) if grading else bencher(client, "build")
        assert lines(build)[4:] == [f"built {'bug' if grading else 'fixed'}"], build
