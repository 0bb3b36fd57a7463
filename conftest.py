"""Fixtures every test tier shares.

A test that needs an engine or a cluster skips with the reason when it is
missing, except under CI=true, where a missing engine is a failure: CI must
never go green by skipping what it was meant to prove.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

IN_CI = os.environ.get("CI") == "true"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`integrity` implies `docker` (DESIGN.md §10): `-m docker` selects those tests too,
    and whatever applies to Docker tests (the leftover check of tests/conftest.py) applies
    to them. First, so `-m` selection already sees the added marker."""
    for item in items:
        if item.get_closest_marker("integrity") and not item.get_closest_marker("docker"):
            item.add_marker(pytest.mark.docker)


def missing(reason: str) -> None:
    """Skip the test, or fail it under CI=true."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: a missing engine is a failure, not a skip)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """A client of the local Docker engine."""
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        missing(f"no Docker engine answers: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: docker.DockerClient) -> str:
    """The base image name; present locally (set-up bootstraps it)."""
    from ssebench.spec import base_image as configured

    name = configured()
    try:
        docker_client.images.get(name)
    except docker.errors.ImageNotFound:
        missing(f"base image {name} is missing: run `ssebench images bootstrap-base`")
    return name


@pytest.fixture(scope="session")
def probe_image(docker_client: docker.DockerClient, base_image: str) -> str:
    """The conformance suite's probe image (from ssebench-conformance), built once per session.

    A small image FROM the base image whose PROBE_MODE says how a run behaves:
    talk, sleep, keep, serve or connect.
    """
    from ssebench.conformance import probe_context

    tag = "ssebench-test/probe:conformance"
    docker_client.images.build(
        path=str(probe_context()),
        tag=tag,
        buildargs={"SSEBENCH_BASE_IMAGE": base_image},
        rm=True,
        pull=False,
    )
    return tag


@pytest.fixture(scope="session")
def ssebench_home() -> Path:
    """The SSEBench home of this checkout (images/, datasets/, uv.lock)."""
    from ssebench.spec import find_home

    return find_home(Path(__file__).resolve().parent)


@pytest.fixture(scope="session")
def runtime_image(docker_client: docker.DockerClient, base_image: str, ssebench_home: Path) -> str:
    """The runtime image's name, built once per session from this checkout.

    The first build of a machine takes minutes; afterwards the engine's cache and
    the prepared package trees make an unchanged rebuild take seconds, and a change
    to ssebench-daemon's source rebuilds only the steps that copy it.
    """
    from ssebench.backends.docker import build_runtime

    return build_runtime(docker_client, ssebench_home).tag


ToolImage = Callable[..., str]
"""`tool_image(task_id, dataset=None)`: the name of a task's tool layer, built once per session."""


@pytest.fixture(scope="session")
def tool_image(
    docker_client: docker.DockerClient, runtime_image: str, ssebench_home: Path
) -> ToolImage:
    """Build a task's case image and tool layer (once per session) and give the tool layer's name.

    `tool_image("tlvkit-heap-overflow")` takes the task from the demo dataset;
    `tool_image("x", dataset=folder)` from another dataset folder. The layer's
    entrypoint is the SSEBench entrypoint: override it to run another command.
    """
    from ssebench.backends.docker import build_case, build_tool
    from ssebench.spec import default_dataset, find_task

    built: dict[tuple[str, Path], str] = {}

    def build(task_id: str, dataset: Path | None = None) -> str:
        folder = (dataset or default_dataset(ssebench_home)).resolve()
        if (task_id, folder) not in built:
            task = find_task(folder, task_id)
            build_case(docker_client, task)
            built[task_id, folder] = build_tool(docker_client, task, ssebench_home).tag
        return built[task_id, folder]

    return build


InstallDistribution = Callable[..., None]


@pytest.fixture
def install_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> InstallDistribution:
    """Install throw-away distributions with entry points on sys.path, the way pip would.

    Call it with `name`, `entry_points` (group to {entry: "module:attr"}) and
    `modules` (file name to source); sys.path is restored after the test.
    """

    def install(
        *, name: str, entry_points: dict[str, dict[str, str]], modules: dict[str, str]
    ) -> None:
        root = tmp_path / f"dist-{name}"
        info = root / f"{name.replace('-', '_')}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        lines = []
        for group, entries in entry_points.items():
            lines.append(f"[{group}]")
            lines += [f"{entry} = {target}" for entry, target in entries.items()]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        for filename, source in modules.items():
            (root / filename).write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(root))

    return install
