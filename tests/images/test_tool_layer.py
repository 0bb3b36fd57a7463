"""The tool layer locks a case image down as the container contract says (docs/architecture.md).

The contract's checks are ssebench-conformance's tool layer suite (any tool
layer must pass them: `tool_layer_tests()`); here they run on the built-in
layer of every demo task and of two synthetic case images (tests/images/dataset):
one holding nothing but a static busybox (no shell, git, Python or /tmp;
accounts written by hand), and a Debian image whose uid 1000 is another user with
groups, a sudo rule, a toolchain and a setuid script. The last two tests are
about what the built-in layer does to those two images.
"""

from __future__ import annotations

from typing import Any

import docker
import pytest

from ssebench.conformance import ToolLayerSubject, docker_subject, tool_layer_tests
from ssebench.spec import default_dataset, find_home, find_task, load_dataset

from .conftest import DATASET, Run, StatPaths

DEMO = default_dataset(find_home())
BUSYBOX = "ssebench-test-busybox-only"
UID1000 = "ssebench-test-debian-uid1000"
LAYERS = [(task.id, DEMO) for task in load_dataset(DEMO)] + [(BUSYBOX, DATASET), (UID1000, DATASET)]


@pytest.fixture(scope="module", params=LAYERS, ids=[task_id for task_id, _ in LAYERS])
def tool_layer_subject(
    request: pytest.FixtureRequest, tool_image: Any, docker_client: docker.DockerClient
) -> ToolLayerSubject:
    task_id, dataset = request.param
    image = tool_image(task_id, dataset)
    return docker_subject(image, find_task(dataset, task_id).config, docker_client)


test_the_built_in_tool_layer_keeps_the_contract = pytest.mark.docker(tool_layer_tests())


def owner(facts: dict[str, Any]) -> tuple[str, str, str]:
    return facts["user"], facts["group"], facts["mode"]


@pytest.mark.docker
def test_a_case_image_with_another_uid_1000_user_gets_a_fresh_model_and_loses_that_user(
    docker_client: docker.DockerClient, tool_image: Any, run: Run, stat_paths: StatPaths
) -> None:
    image = tool_image(UID1000, DATASET)
    groups = [run(image, ["getent", "group", name]).stdout.strip() for name in ("users", "staff")]
    assert groups == ["users:x:100:", "staff:x:50:"], "builder is in no group any more"
    assert run(image, ["getent", "group", "builders"]).status == 2
    assert run(image, ["getent", "passwd", "builder"]).status == 2
    sudo = run(image, ["cat", "/etc/sudoers.d/builder"]).ok()
    assert sudo.startswith("# disabled by SSEBench: builder ALL=")
    facts = stat_paths(
        image,
        [
            "/opt/toolchain/cc",
            "/home/builder/project/run-me.sh",
            "/ssebench-repo/run-me.sh",
            "/home/model",
        ],
    )
    assert owner(facts["/opt/toolchain/cc"])[:2] == ("root", "root"), "uid 1000's files are root's"
    assert owner(facts["/home/builder/project/run-me.sh"]) == ("model", "model", "0o755")
    assert owner(facts["/ssebench-repo/run-me.sh"]) == ("root", "root", "0o755")
    assert owner(facts["/home/model"]) == ("model", "model", "0o700")
    tracked = run(image, ["git", "ls-files"], user="model", workdir="/home/builder/project").ok()
    assert tracked.split() == [".gitignore", "README", "keep.gen", "run-me.sh", "vendor/lib/v.c"]
    history = run(image, ["git", "-C", "/ssebench-repo", "log", "--format=%s"]).ok()
    assert history.split("\n")[:2] == ["second", "first"], "the graded copy keeps its history"
    config = docker_client.images.get(image).attrs["Config"]
    assert config.get("User") in ("0:0", "root", "0")


@pytest.mark.docker
def test_an_image_without_shell_git_or_tmp_gets_the_bundled_ones(
    tool_image: Any, run: Run, stat_paths: StatPaths
) -> None:
    image = tool_image(BUSYBOX, DATASET)
    facts = stat_paths(image, ["/bin/bash", "/bin/sh", "/usr/bin/git", "/tmp"])
    assert {path: facts[path]["kind"] for path in facts} == {
        "/bin/bash": "link",
        "/bin/sh": "link",
        "/usr/bin/git": "link",
        "/tmp": "dir",
    }
    assert facts["/tmp"]["mode"] == "0o1777"
    output = run(image, ["/bin/sh", "-c", 'echo "$BASH_VERSION"; git --version']).ok()
    assert output.startswith("5.") and "git version 2." in output
