"""Tasks nobody here wrote: a PoC that needs its folder, a 10,000-file tree, a FROM that
is not on the machine, and two datasets with one task ID, against a real engine.

The datasets are in `datasets/`: `foreign` (a PoC folder, a large tree) and
`twin-a`/`twin-b` (one task ID, two tasks).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from typer.testing import CliRunner

from ssebench.backends.docker import DockerBackend, build_tool_images
from ssebench.backends.docker.commands import build_case_app
from ssebench.spec import Agent, ImageRequest, find_agent, find_home, find_task

HERE = Path(__file__).resolve().parent
DATASETS = HERE / "datasets"
FOREIGN = DATASETS / "foreign"
HOME = find_home(HERE)


def ssebench_run(cwd: Path, dataset: Path, task: str, agent: str, *options: str) -> Any:
    """Start `ssebench run --json` in `cwd` (the caller waits)."""
    script = Path(sys.executable).with_name("ssebench")
    argv = [str(script), "run", "--local", str(dataset), "--task", task, "--agent", agent]
    return subprocess.Popen(
        [*argv, "--json", "--timeout", "600", *options],
        cwd=cwd,
        env={**os.environ, "SSEBENCH_HOME": str(HOME)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def summary_of(process: Any) -> dict[str, Any]:
    stdout, stderr = process.communicate(timeout=1500)
    assert stdout, stderr
    found: dict[str, Any] = json.loads(stdout)
    return found


@pytest.mark.docker
@pytest.mark.timeout(1800)
def test_a_poc_that_needs_the_files_of_its_folder_passes_with_the_reference_and_not_the_dummy(
    base_image: str, tmp_path: Path
) -> None:
    reference = summary_of(ssebench_run(tmp_path, FOREIGN, "foreign-poc-folder", "reference"))
    dummy = summary_of(ssebench_run(tmp_path, FOREIGN, "foreign-poc-folder", "dummy"))

    fixed = reference["patch_result"]
    assert fixed["status"] == "passed", fixed
    assert (fixed["pov_passed"], fixed["pov_total"]) == (1, 1)
    left = dummy["patch_result"]
    assert left["status"] == "failed", left
    assert (left["build_success"], left["func_test_success"]) == (True, True)
    assert (left["pov_passed"], left["pov_total"]) == (0, 1)
    # The dummy's PoC failed for the bug, not for want of expect.env beside the PoC.
    logs = "".join(path.read_text() for path in tmp_path.glob("results/**/*poc*.log"))
    assert "check.sh said 3, not 1" in logs
    assert "no expect.env" not in logs


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_a_10000_file_tree_leaves_no_gc_log_and_a_commit_there_says_nothing(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    task = find_task(FOREIGN, "foreign-large-tree")
    tool = build_tool_images(docker_client, [task], HOME)[-1]
    # Two commits as the agent, a pause after each for a background gc to leave its log;
    # git's own summary lines of a commit are dropped, anything else is a warning.
    commit = "git -c user.name=a -c user.email=a@b.invalid commit -am"
    script = (
        "cd /src/large && for n in 1 2; do echo $n >> README; "
        f"{commit} c$n 2>&1 | grep -v -e '^\\[main' -e '^ '; sleep 3; done; "
        "ls .git/gc.log 2>&1; git count-objects | cut -d, -f1"
    )
    said = docker_client.containers.run(
        tool.image_id,
        ["-c", script],
        entrypoint=["bash"],
        user="model",
        network_disabled=True,
        remove=True,
        stderr=True,
    ).decode()
    *lines, loose = said.splitlines()
    assert lines == ["ls: cannot access '.git/gc.log': No such file or directory"], said
    # Only the two commits' own objects are loose: the tree's are packed, so no gc starts.
    assert int(loose.split()[0]) < 10, said


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection (a registry stand-in)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.server.getsockname()[1]
        self.connections: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                peer, _ = self.server.accept()
            except OSError:
                return
            with peer:
                peer.settimeout(2)
                try:
                    self.connections.append(peer.recv(4096))
                except OSError:
                    self.connections.append(b"")


@pytest.fixture
def registry_stand_in() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.server.close()


@pytest.mark.docker
def test_a_from_image_not_on_the_machine_is_one_clear_line_and_nothing_is_pulled(
    base_image: str, tmp_path: Path, registry_stand_in: Listener
) -> None:
    dataset = tmp_path / "elsewhere"
    shutil.copytree(FOREIGN / "foreign-poc-folder", dataset / "foreign-poc-folder")
    (dataset / "dataset.yaml").write_text("version: '1'\nname: elsewhere\n")
    image = f"127.0.0.1:{registry_stand_in.port}/earlier/base:1"
    (dataset / "foreign-poc-folder" / "Dockerfile").write_text(
        f"ARG SOURCE={image}\nFROM ${{SOURCE}}\nCOPY src/ /src/wordcheck/\n"
    )

    result = CliRunner().invoke(build_case_app, ["--local", str(dataset)])

    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"Dockerfile line 2: FROM {image} is not on this machine" in result.stderr
    assert "SSEBENCH_BASE_IMAGE" in result.stderr
    assert registry_stand_in.connections == []


@pytest.mark.docker
def test_a_listed_poc_missing_from_the_folder_is_reported_before_any_build(
    base_image: str, tmp_path: Path
) -> None:
    dataset = tmp_path / "missing"
    shutil.copytree(FOREIGN / "foreign-poc-folder", dataset / "foreign-poc-folder")
    (dataset / "dataset.yaml").write_text("version: '1'\nname: missing-poc\n")
    (dataset / "foreign-poc-folder" / "sse" / "pocs" / "case1" / "trigger.txt").unlink()

    result = CliRunner().invoke(build_case_app, ["--local", str(dataset), "--json"])

    assert result.exit_code == 1
    assert (
        "sse/pocs/case1/trigger.txt (files.poc 'pocs/case1/trigger.txt') is missing"
        in result.stderr
    )
    assert "Step 1/" not in result.stderr
    # A run says the same before it builds anything, the runtime image included.
    run = ssebench_run(tmp_path, dataset, "foreign-poc-folder", "dummy")
    _, said = run.communicate(timeout=300)
    assert run.returncode != 0
    assert "sse/pocs/case1/trigger.txt (files.poc 'pocs/case1/trigger.txt') is missing" in said
    assert "runtime:" not in said and "case:" not in said, said


def twin_request(name: str, agent: Agent) -> ImageRequest:
    return ImageRequest(mode="sandbox", task=find_task(DATASETS / name, "twin-task"), agent=agent)


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_two_datasets_with_one_task_id_each_keep_their_own_images(
    base_image: str, tmp_path: Path
) -> None:
    backend = DockerBackend()
    agent = find_agent(HOME, "dummy")
    first = backend.prepare_images(twin_request("twin-a", agent))
    second = backend.prepare_images(twin_request("twin-b", agent))  # same names, other images

    assert first.agent.startswith("sha256:") and second.agent.startswith("sha256:")
    assert first.agent != second.agent and first.environment != second.environment
    # The task's files are in its checker's image (the agent's holds none of them).
    for images, project in ((first, "twin-a"), (second, "twin-b")):
        assert images.environment is not None
        backend.copy_from_image(images.environment, "/ssebench/config.yaml", tmp_path / project)
        assert f"project: {project}\n" in (tmp_path / project).read_text()


@pytest.mark.docker
@pytest.mark.timeout(1800)
def test_two_datasets_with_one_task_id_built_and_run_at_once_each_grade_their_own(
    base_image: str, tmp_path: Path
) -> None:
    runs = {
        name: ssebench_run(tmp_path / name, DATASETS / name, "twin-task", "reference")
        for name in ("twin-a", "twin-b")
        if (tmp_path / name).mkdir() is None
    }
    graded = {name: summary_of(process) for name, process in runs.items()}

    a, b = graded["twin-a"]["patch_result"], graded["twin-b"]["patch_result"]
    assert (a["status"], a["build_success"], a["func_test_success"]) == ("passed", True, True)
    assert (b["status"], b["build_success"], b["func_test_success"]) == ("passed", True, None)
    for name in runs:
        logs = "".join(path.read_text() for path in (tmp_path / name).glob("results/**/*.log"))
        assert f"building the task of dataset {name}" in logs
