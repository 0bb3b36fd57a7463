"""Sidecar mode's images (docs/architecture.md): the task-independent agent base, an agent built
and sealed on it, and the task container's image, which runs the daemon only."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from ssebench.backends.docker._build import BuildLine
from ssebench.backends.docker._sidecar_layers import (
    build_sidecar_agent,
    build_sidecar_agent_base,
    build_tool_sidecar,
    sidecar_agent_image_name,
    sidecar_agent_stage_name,
)
from ssebench.spec import Agent, default_dataset, find_task

from .conftest import Run, StatPaths

pytestmark = pytest.mark.docker

LAUNCHER = ["/opt/ssebench/bin/python3.11", "-I", "-m", "ssebench.daemon.launcher"]
"""The agent images' entrypoint: SSEBench's launcher, which the agent's CMD follows."""
PLAIN = (
    'ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY run.sh /opt/agent/run.sh\nCMD ["/opt/agent/run.sh"]\n'
)
HOSTILE = """ARG TOOL_IMAGE
FROM ${TOOL_IMAGE}
COPY run.sh /opt/agent/run.sh
RUN echo evil > /opt/ssebench/bin/planted \\
 && mkdir -p /ssebench/diffs /ssebench-repo && echo x > /ssebench/config.yaml \\
 && echo planted > /usr/local/bin/model-owned && chown 1000:1000 /usr/local/bin/model-owned \\
 && chmod 0777 /etc \\
 && echo 'model:x:0:0::/root:/bin/sh' >> /etc/passwd
CMD ["/opt/agent/run.sh"]
"""


@pytest.fixture
def make_agent(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Any]:
    """A throw-away agent; its sidecar images go afterwards."""
    made: list[Agent] = []

    def make(name: str, dockerfile: str) -> Agent:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "Dockerfile").write_text(dockerfile)
        (folder / "run.sh").write_text("#!/bin/sh\necho agent\n")
        made.append(Agent(name=name, version="1", uses_model=False, folder=str(folder)))
        return made[-1]

    yield make
    for agent in made:
        for name in (sidecar_agent_stage_name(agent), sidecar_agent_image_name(agent)):
            with contextlib.suppress(docker.errors.ImageNotFound):
                docker_client.images.remove(name, force=True)


def test_the_sidecar_agent_base_has_the_contracts_users_and_folders_and_no_task(
    runtime_image: str,
    docker_client: docker.DockerClient,
    ssebench_home: Path,
    stat_paths: StatPaths,
    run: Run,
) -> None:
    base = build_sidecar_agent_base(docker_client, ssebench_home)
    facts = stat_paths(
        base.tag,
        ["/ssebench", "/ssebench-repo", "/run/ssebench", "/var/lib/ssebench", "/tmp/sse-archive"],
    )
    assert facts["/ssebench"] is None and facts["/ssebench-repo"] is None
    assert facts["/run/ssebench"] == {
        "user": "root",
        "group": "root",
        "mode": "0o700",
        "kind": "dir",
    }
    assert facts["/var/lib/ssebench"]["mode"] == "0o700"
    assert facts["/tmp/sse-archive"]["user"] == "model"
    ids = run(base.tag, ["/bin/sh", "-c", "id -u model; id -G model; id -u sse-runner"]).ok()
    model_uid, model_groups, runner_uid = ids.split("\n")[:3]
    assert (model_uid, model_groups) == ("1000", "1000")
    assert 100 <= int(runner_uid) < 1000
    assert docker_client.images.get(base.tag).attrs["Config"]["Entrypoint"] == LAUNCHER


def test_a_hostile_sidecar_agent_build_cannot_change_ssebench_paths(
    runtime_image: str,
    docker_client: docker.DockerClient,
    ssebench_home: Path,
    make_agent: Any,
    stat_paths: StatPaths,
    run: Run,
) -> None:
    agent = make_agent("sidecar-hostile", HOSTILE)
    image = build_sidecar_agent(docker_client, agent, ssebench_home, lambda _line: None)
    facts = stat_paths(
        image.tag,
        ["/opt/ssebench/bin/planted", "/ssebench", "/ssebench-repo", "/usr/local/bin/model-owned"],
    )
    assert facts["/opt/ssebench/bin/planted"] is None
    assert facts["/ssebench"] is None and facts["/ssebench-repo"] is None
    assert facts["/usr/local/bin/model-owned"]["user"] == "root"
    assert stat_paths(image.tag, ["/etc"])["/etc"]["mode"] == "0o755"
    assert run(image.tag, ["/bin/sh", "-c", "id -u model"]).ok() == "1000\n"
    config = docker_client.images.get(image.tag).attrs["Config"]
    assert config["Entrypoint"] == LAUNCHER
    assert config["Cmd"] == ["/opt/agent/run.sh"]


def test_the_agent_image_serves_every_task_and_is_not_built_again(
    runtime_image: str,
    docker_client: docker.DockerClient,
    ssebench_home: Path,
    make_agent: Any,
) -> None:
    agent = make_agent("sidecar-plain", PLAIN)
    first = build_sidecar_agent(docker_client, agent, ssebench_home, lambda _line: None)
    lines: list[BuildLine] = []
    again = build_sidecar_agent(docker_client, agent, ssebench_home, lines.append)
    assert again.image_id == first.image_id
    assert [(line.layer, line.reused) for line in lines] == [
        ("sidecar-agent", True),
        ("agent sidecar-plain", True),
        ("agent sidecar-plain (sealed)", True),
    ]


def test_the_checkers_image_runs_the_entrypoint_for_an_agent_container(
    tool_image: Any, docker_client: docker.DockerClient, ssebench_home: Path
) -> None:
    task = find_task(default_dataset(ssebench_home), "pyarchive-path-traversal")
    tool_image(task.id)
    image = build_tool_sidecar(docker_client, task, ssebench_home)
    config = docker_client.images.get(image.tag).attrs["Config"]
    assert config["Entrypoint"] == [
        "/opt/ssebench/bin/python3.11",
        "-I",
        "-m",
        "ssebench.daemon.entrypoint",
    ]
    assert config["Cmd"] == ["--agent-container"]
