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
