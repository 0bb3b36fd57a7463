"""The runtime (/opt/ssebench) runs in any x86_64 Linux image, and its git, bash and helpers
(tar, sleep, touch: what Kubernetes' helper containers run) work.

Its Python runs and imports the daemon in each demo task's tool layer and in an
image holding nothing but a static busybox: no libc, no shell, no Python.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator

import docker
import pytest

from ssebench.backends.docker import build_layer
from ssebench.spec import default_dataset, find_home, load_dataset

DEMO_TASKS = [task.id for task in load_dataset(default_dataset(find_home()))]
PYTHON = "/opt/ssebench/bin/python3.11"
TOOLS = "/opt/ssebench/tools/bin"

BUSYBOX_DOCKERFILE = """\
ARG SSEBENCH_BASE_IMAGE
ARG RUNTIME_IMAGE
FROM ${RUNTIME_IMAGE} AS runtime
FROM ${SSEBENCH_BASE_IMAGE} AS tools
RUN apt-get update \\
 && apt-get install -y --no-install-recommends busybox-static git \\
 && rm -rf /var/lib/apt/lists/*
FROM scratch
COPY --from=tools /bin/busybox /bin/busybox
COPY --from=runtime /opt/ssebench /opt/ssebench
"""

IMPORTS = """
import json, os, subprocess, sys
import asyncio, bz2, ctypes, lzma, sqlite3, ssl, zlib
import ssebench.daemon, ssebench.spec
import anyio, mcp, msgspec, pydantic_core, starlette, uvicorn, yaml
ssl.create_default_context()
child = subprocess.run([sys.executable, "-I", "-c", "print(6 * 7)"], capture_output=True, text=True)
print(json.dumps({
    "prefix": sys.prefix,
    "daemon": ssebench.daemon.__file__,
    "child": child.stdout.strip(),
    "environment": {k: v for k, v in os.environ.items() if "/opt/ssebench" in v},
}))
"""

# Bundled git and bash with nothing else: busybox only for mkdir and cat.
GIT_SCRIPT = """
set -eu
git=/opt/ssebench/tools/bin/git
/bin/busybox mkdir -p /work/repo
cd /work/repo
$git -c init.defaultBranch=main init -q
printf 'one\\n' > file.txt
$git add file.txt
$git -c user.name=T -c user.email=t@example.invalid -c maintenance.auto=false \\
  commit -q -m first
printf 'two\\n' >> file.txt
$git diff > /work/change.diff
$git checkout -q -- file.txt
$git apply /work/change.diff
$git diff --stat
/bin/busybox cat file.txt
echo "commits: $($git rev-list --count HEAD)"
echo "bash: $BASH_VERSION"
tools=/opt/ssebench/tools/bin
$tools/touch /work/touched
$tools/sleep 0.1
$tools/tar -C /work -cf - touched change.diff | $tools/tar -tf -
"""


def context(dockerfile: str) -> io.BytesIO:
    stream = io.BytesIO()
    with tarfile.open(fileobj=stream, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    stream.seek(0)
    return stream


@pytest.fixture(scope="module")
def busybox_image(
    docker_client: docker.DockerClient, base_image: str, runtime_image: str
) -> Iterator[str]:
    """An image holding nothing but a static busybox and /opt/ssebench."""
    tag = "ssebench-test/busybox-runtime:latest"
    build_layer(
        docker_client,
        layer="busybox test",
        tag=tag,
        context=context(BUSYBOX_DOCKERFILE),
        buildargs={"SSEBENCH_BASE_IMAGE": base_image, "RUNTIME_IMAGE": runtime_image},
    )
    yield tag
    docker_client.images.remove(tag, force=True)


def check_imports(output: str) -> None:
    facts = json.loads(output)
    assert facts["prefix"] == "/opt/ssebench"
    assert facts["daemon"].startswith("/opt/ssebench/lib/python3/dist-packages/ssebench/daemon/")
    assert facts["child"] == "42"
    assert facts["environment"] == {}, "nothing in the environment points into /opt/ssebench"


@pytest.mark.docker
def test_the_runtime_python_imports_the_daemon_in_an_image_of_nothing_but_busybox(
    run, busybox_image: str
) -> None:
    listing = run(busybox_image, ["/bin/busybox", "ls", "/", "/bin"]).ok().split()
    everything = sorted(set(listing) - {"/:", "/bin:"})
    assert everything == ["bin", "busybox", "dev", "etc", "opt", "proc", "sys"]
    check_imports(run(busybox_image, [PYTHON, "-I", "-c", IMPORTS]).ok())


@pytest.mark.docker
@pytest.mark.parametrize("task_id", DEMO_TASKS)
def test_the_runtime_python_imports_the_daemon_in_each_demo_tool_layer(
    run, tool_image, task_id: str
) -> None:
    check_imports(run(tool_image(task_id), [PYTHON, "-I", "-c", IMPORTS]).ok())


@pytest.mark.docker
def test_the_runtime_image_itself_runs_its_python_with_nothing_else_in_it(
    run, runtime_image: str
) -> None:
    output = run(runtime_image, [PYTHON, "-I", "-c", "import ssebench.daemon; print('ok')"]).ok()
    assert output == "ok\n"


@pytest.mark.docker
def test_bundled_git_and_helpers_work_with_bundled_bash_in_busybox(run, busybox_image: str) -> None:
    output = run(busybox_image, [f"{TOOLS}/bash", "-c", GIT_SCRIPT]).ok()
    assert " 1 file changed, 1 insertion(+)" in output
    assert "one\ntwo\n" in output
    assert "commits: 1" in output
    assert "bash: 5." in output
    assert output.endswith("touched\nchange.diff\n"), output


@pytest.mark.docker
def test_the_tool_layer_environment_points_nowhere_into_the_runtime(
    docker_client: docker.DockerClient, tool_image
) -> None:
    for task_id in DEMO_TASKS:
        config = docker_client.images.get(tool_image(task_id)).attrs["Config"]
        assert not [value for value in config.get("Env") or [] if "/opt/ssebench" in value]


@pytest.mark.docker
def test_an_unchanged_runtime_is_reused_without_sending_the_engine_a_build(
    docker_client: docker.DockerClient, runtime_image: str
) -> None:
    from ssebench.backends.docker import BuildLine, build_runtime

    first = build_runtime(docker_client, find_home())
    lines: list[BuildLine] = []
    image = build_runtime(docker_client, find_home(), progress=lines.append)
    assert image.tag == runtime_image and image.cached
    assert image.image_id == first.image_id == docker_client.images.get(runtime_image).id
    assert not [line for line in lines if line.step is not None], "no build step was sent"
    assert lines[-1].text == f"{runtime_image} is up to date: its inputs have not changed"
