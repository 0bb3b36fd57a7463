"""Agent layers: the agent's Dockerfile never runs where hidden material is, names no other
image, and the sealed layer holds SSEBench's paths exactly as the tool layer does, but
the hidden material: no agent image holds /ssebench or /ssebench-repo.

Every test builds real images (on the demo task pyarchive-path-traversal, and on the
busybox-only synthetic case image) with throw-away agents, removed afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from ssebench.backends.docker import BuildLine, case_image_name
from ssebench.backends.docker._agent_dockerfile import AgentDockerfileError
from ssebench.backends.docker._agent_layer import (
    agent_image_name,
    agent_stage_image_name,
    build_agent,
)
from ssebench.spec import (
    Agent,
    ImageUnavailableError,
    Task,
    contract,
    default_dataset,
    find_task,
)

from .conftest import DATASET, RUNTIME_PYTHON, Run

TASK = "pyarchive-path-traversal"
BUSYBOX = "ssebench-test-busybox-only"

HIDDEN = ["/ssebench", "/ssebench-repo"]
"""Only the checker's image, the tool layer, holds them."""
LAUNCHER = ["/opt/ssebench/bin/python3.11", "-I", "-m", "ssebench.daemon.launcher"]
SEALED = [
    "/opt/ssebench",
    "/var/lib/ssebench-runner",
    "/run/ssebench",
    "/var/lib/ssebench",
    "/tmp/sse-archive",
    "/etc/passwd",
    "/etc/group",
    "/etc/shadow",
    "/etc/gshadow",
]
"""What an agent layer must hold exactly as its tool layer does (and their parents)."""
PARENTS = ["/opt", "/var", "/var/lib", "/run", "/tmp", "/etc"]

# Every entry under the paths given (the path itself included): numeric owner, group,
# mode, kind, and a file's SHA-256 or a link's target; None for a missing path.
TREE_PROBE = r"""
import hashlib, json, os, stat, sys
found = {}
for top in sys.argv[1:]:
    if not os.path.lexists(top):
        found[top] = None
        continue
    todo = [top]
    while todo:
        path = todo.pop()
        info = os.lstat(path)
        entry = [info.st_uid, info.st_gid, oct(stat.S_IMODE(info.st_mode))]
        if stat.S_ISLNK(info.st_mode):
            entry += ["link", os.readlink(path)]
        elif stat.S_ISDIR(info.st_mode):
            entry += ["dir"]
            todo += [os.path.join(path, name) for name in os.listdir(path)]
        else:
            with open(path, "rb") as file:
                entry += ["file", hashlib.sha256(file.read()).hexdigest()]
        found[path] = entry
print(json.dumps(found))
"""

MakeAgent = Callable[..., Agent]


def task_of(task_id: str) -> Task:
    if task_id == BUSYBOX:
        return find_task(DATASET, task_id)
    return find_task(default_dataset(Path(__file__).resolve().parents[2]), task_id)


@pytest.fixture
def make_agent(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[MakeAgent]:
    """`make_agent(name, dockerfile, files={})`: a throw-away agent; its images go afterwards."""
    made: list[Agent] = []

    def make(name: str, dockerfile: str, files: dict[str, str] | None = None) -> Agent:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "Dockerfile").write_text(dockerfile)
        for file_name, text in (files or {}).items():
            (folder / file_name).write_text(text)
        agent = Agent(name=name, version="1", uses_model=False, folder=str(folder))
        made.append(agent)
        return agent

    yield make
    for agent in made:
        for task_id in (TASK, BUSYBOX):
            task = task_of(task_id)
            for name in (agent_stage_image_name(agent, task), agent_image_name(agent, task)):
                if exists(docker_client, name):
                    docker_client.images.remove(name, force=True)


def sealed_tree(run: Run, image: str) -> dict[str, Any]:
    """SSEBench's sealed paths in an agent image, but the agent's command the seal added
    (`contract.AGENT_COMMAND_FILE`, checked on its own)."""
    found = tree(run, image, *SEALED)
    found.pop(contract.AGENT_COMMAND_FILE, None)
    return found


def tree(run: Run, image: str, *paths: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        run(image, [RUNTIME_PYTHON, "-I", "-c", TREE_PROBE, *paths]).ok()
    )
    return found


def exists(client: docker.DockerClient, name: str) -> bool:
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


PLAIN = (
    'ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY run.sh /opt/agent/run.sh\nCMD ["/opt/agent/run.sh"]\n'
)


@pytest.mark.docker
@pytest.mark.parametrize("task_id", [TASK, BUSYBOX])
def test_the_agent_layer_holds_ssebench_paths_as_the_tool_layer_does_and_the_agents_cmd(
    task_id: str,
    tool_image: Any,
    docker_client: docker.DockerClient,
    run: Run,
    make_agent: MakeAgent,
    ssebench_home: Path,
) -> None:
    task = task_of(task_id)
    tool = tool_image(task_id, DATASET if task_id == BUSYBOX else None)
    agent = make_agent("probe-plain", PLAIN, {"run.sh": "#!/bin/sh\necho agent\n"})
    built = build_agent(docker_client, agent, task, ssebench_home, lambda _line: None)

    assert built.tag == agent_image_name(agent, task)
    assert sealed_tree(run, built.tag) == tree(run, tool, *SEALED)
    facts = tree(run, built.tag, *PARENTS, "/etc/ld.so.preload", "/etc/nsswitch.conf")
    tool_facts = tree(run, tool, *PARENTS, "/etc/ld.so.preload", "/etc/nsswitch.conf")
    for path in PARENTS:
        assert facts[path][:4] == tool_facts[path][:4], path
    empty = [
        0,
        0,
        "0o644",
        "file",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    ]
    assert facts["/etc/ld.so.preload"] == (tool_facts["/etc/ld.so.preload"] or empty)
    assert facts["/etc/nsswitch.conf"] == (tool_facts["/etc/nsswitch.conf"] or empty)
    assert tree(run, built.tag, *HIDDEN) == dict.fromkeys(HIDDEN)
    assert "/ssebench/config.yaml" in tree(run, tool, "/ssebench")

    config = docker_client.images.get(built.tag).attrs["Config"]
    assert config["User"] == "0:0"
    assert config["Entrypoint"] == LAUNCHER
    assert config["Cmd"] == ["/opt/agent/run.sh"]
    assert config["Healthcheck"] == {"Test": ["NONE"]}
    # The command the launcher runs, root's to write, recorded when the image was sealed.
    assert tree(run, built.tag, contract.AGENT_COMMAND_FILE)[contract.AGENT_COMMAND_FILE][:4] == [
        0,
        0,
        "0o644",
        "file",
    ]
    read = "import sys; sys.stdout.write(open(sys.argv[1]).read())"
    recorded = run(built.tag, [RUNTIME_PYTHON, "-I", "-c", read, contract.AGENT_COMMAND_FILE]).ok()
    assert json.loads(recorded) == ["/opt/agent/run.sh"]


HOSTILE = r"""ARG TOOL_IMAGE
FROM ${TOOL_IMAGE}
RUN (cat /ssebench/diffs/patch.diff || true) > /leak; \
    (ls -laR /ssebench-repo /ssebench || true) > /leak2 2>&1; \
    find / -xdev \( -name patch.diff -o -name dotdot-escape.zip -o -name path-traversal.txt \) \
      > /leak3 2>&1
RUN mkdir -m 0777 /tmp/planted && ln -s /tmp/planted /ssebench \
 && mkdir -m 0777 /ssebench-repo && echo junk > /ssebench-repo/junk \
 && printf '#!/bin/sh\necho hijacked\n' > /opt/ssebench/bin/python3.11 \
 && echo 'import os; os.system("id > /tmp/pth-ran")' \
      > /opt/ssebench/lib/python3/dist-packages/evil.pth \
 && chmod 0777 /opt /var/lib/ssebench-runner /tmp/sse-archive \
 && rm -rf /run/ssebench && ln -s /tmp /run/ssebench \
 && sed -i 's/^model:x:1000:1000:/model:x:0:0:/' /etc/passwd \
 && echo 'root:x:0:model' >> /etc/group \
 && chmod 0777 /usr/local/bin && touch /usr/local/bin/planted \
 && chown 1000:1000 /usr/local/bin/planted \
 && echo /opt/agent/evil.so > /etc/ld.so.preload
CMD ["/bin/true"]
"""


@pytest.mark.docker
def test_a_hostile_agent_build_sees_no_hidden_material_and_cannot_change_ssebench_paths(
    tool_image: Any,
    docker_client: docker.DockerClient,
    run: Run,
    make_agent: MakeAgent,
    ssebench_home: Path,
) -> None:
    task = task_of(TASK)
    tool = tool_image(TASK)
    agent = make_agent("probe-hostile", HOSTILE)
    built = build_agent(docker_client, agent, task, ssebench_home, lambda _line: None)

    # The agent's build ran where none of the hidden material was.
    leaks = run(
        built.tag, ["/bin/sh", "-c", "cat /leak; echo ---; cat /leak2; echo ---; cat /leak3"]
    )
    leak, listing, found = leaks.ok().split("---\n")
    assert leak == ""
    assert listing.count("No such file or directory") == 2, listing
    assert found == "", found

    # Its links, folders and programs at SSEBench's paths are gone; all is as in the tool
    # layer, and what it planted at the hidden material's paths is gone too.
    assert sealed_tree(run, built.tag) == tree(run, tool, *SEALED)
    assert tree(run, built.tag, *HIDDEN) == dict.fromkeys(HIDDEN)
    parents = tree(run, built.tag, "/opt")["/opt"]
    assert parents[:4] == tree(run, tool, "/opt")["/opt"][:4]
    preload = tree(run, built.tag, "/etc/ld.so.preload")["/etc/ld.so.preload"]
    assert preload[3:] == [
        "file",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    ]
    assert run(built.tag, ["id", "model"]).ok().strip() == (
        "uid=1000(model) gid=1000(model) groups=1000(model)"
    )
    assert run(built.tag, [RUNTIME_PYTHON, "-I", "-c", "print('ours')"]).ok() == "ours\n"
    assert tree(run, built.tag, "/tmp/pth-ran")["/tmp/pth-ran"] is None

    # The sweep: what the agent's build opened to model is closed again.
    swept = tree(run, built.tag, "/usr/local/bin", "/usr/local/bin/planted")
    assert swept["/usr/local/bin"][2] == "0o775"
    assert swept["/usr/local/bin/planted"][:2] == [0, 0]


@pytest.mark.docker
@pytest.mark.parametrize(
    ("name", "dockerfile", "line"),
    [
        (
            "probe-copy-from",
            "ARG TOOL_IMAGE\nFROM ${{TOOL_IMAGE}}\nCOPY --from={case} /ssebench /x\n",
            3,
        ),
        ("probe-two-froms", "ARG TOOL_IMAGE\nFROM ${{TOOL_IMAGE}}\nFROM {case}\n", 3),
    ],
    ids=["copy-from", "second-from"],
)
def test_a_dockerfile_naming_the_case_image_is_refused_before_anything_is_built(
    name: str,
    dockerfile: str,
    line: int,
    tool_image: Any,
    docker_client: docker.DockerClient,
    make_agent: MakeAgent,
    ssebench_home: Path,
) -> None:
    task = task_of(TASK)
    tool_image(TASK)
    agent = make_agent(name, dockerfile.format(case=case_image_name(task)))
    lines: list[BuildLine] = []
    with pytest.raises(AgentDockerfileError) as raised:
        build_agent(docker_client, agent, task, ssebench_home, lines.append)
    message = str(raised.value)
    assert message.startswith(f"agent {name}: {agent.folder}/Dockerfile line {line}: ")
    assert "one `FROM ${TOOL_IMAGE}`" in message
    assert lines == [], "no build was sent"
    assert not exists(docker_client, agent_stage_image_name(agent, task))
    assert not exists(docker_client, agent_image_name(agent, task))


@pytest.mark.docker
@pytest.mark.parametrize(
    ("name", "dockerfile", "message"),
    [
        (
            "probe-preload",
            'ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nENV LD_PRELOAD=/opt/agent/x.so\nCMD ["true"]\n',
            "agent probe-preload: its Dockerfile sets the variable LD_PRELOAD, which would act "
            "in SSEBench's own processes; set what the agent needs in its command instead",
        ),
        (
            "probe-no-cmd",
            "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nRUN true\n",
            "agent probe-no-cmd: its Dockerfile has no CMD; give it the agent's command, "
            'e.g. CMD ["/bin/bash", "/opt/agent/run.sh"]',
        ),
    ],
    ids=["loader-variable", "no-cmd"],
)
def test_an_agent_image_with_a_loader_variable_or_no_cmd_is_refused_in_one_line_and_not_sealed(
    name: str,
    dockerfile: str,
    message: str,
    tool_image: Any,
    docker_client: docker.DockerClient,
    make_agent: MakeAgent,
    ssebench_home: Path,
) -> None:
    task = task_of(TASK)
    tool_image(TASK)
    agent = make_agent(name, dockerfile)
    with pytest.raises(ImageUnavailableError) as raised:
        build_agent(docker_client, agent, task, ssebench_home, lambda _line: None)
    assert str(raised.value) == message
    assert not exists(docker_client, agent_image_name(agent, task))


@pytest.mark.docker
def test_an_unchanged_agent_layer_is_not_built_again(
    tool_image: Any,
    docker_client: docker.DockerClient,
    make_agent: MakeAgent,
    ssebench_home: Path,
) -> None:
    task = task_of(TASK)
    tool_image(TASK)
    agent = make_agent("probe-again", PLAIN, {"run.sh": "#!/bin/sh\necho agent\n"})
    first = build_agent(docker_client, agent, task, ssebench_home, lambda _line: None)
    lines: list[BuildLine] = []
    again = build_agent(docker_client, agent, task, ssebench_home, lines.append)
    assert again.image_id == first.image_id
    assert [(line.layer, line.reused) for line in lines] == [
        ("tool-base", True),
        ("agent probe-again", True),
        ("agent probe-again (sealed)", True),
    ]
