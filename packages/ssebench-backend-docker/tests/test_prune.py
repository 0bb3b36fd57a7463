"""`ssebench images prune` on the engine: only the active prefix's stale images go.

Every image here is made by the test under two prefixes of its own; the prune
runs under one of them, and the other's images, dangling ones included, must
stay. The base image, which stale names are put on, must stay too.
"""

from __future__ import annotations

import contextlib
import io
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
from typer.testing import CliRunner

from ssebench.backends.docker._build import REGISTRY_LABEL
from ssebench.backends.docker.commands import images_app
from ssebench.spec import find_home, runtime_version

pytestmark = pytest.mark.docker

HOME = find_home(Path(__file__).resolve().parent)


def exists(client: docker.DockerClient, name: str) -> bool:
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


class Images:
    """Builds small images under a prefix; removes them all at the end."""

    def __init__(self, client: docker.DockerClient, base: str) -> None:
        self.client = client
        self.base = base
        self.made: list[str] = []
        self.tags: list[str] = []

    def build(self, prefix: str, tag: str, content: str) -> str:
        """An image with 1 MB of its own, labelled as built under `prefix`, named `tag`."""
        dockerfile = (
            f"FROM {self.base}\n"
            f"RUN head -c 1048576 /dev/urandom > /blob && echo {content} > /mark\n"
            f"LABEL {REGISTRY_LABEL}={prefix}\n"
        )
        image, _ = self.client.images.build(
            fileobj=io.BytesIO(dockerfile.encode()), tag=tag, pull=False, rm=True
        )
        self.made.append(str(image.id))
        self.tags.append(tag)
        return str(image.id)

    def tag(self, image: str, name: str) -> None:
        self.client.images.get(image).tag(name)
        self.tags.append(name)

    def remove(self) -> None:
        for name in [*self.tags, *self.made]:
            with contextlib.suppress(docker.errors.APIError):
                self.client.images.remove(name, force=True)


@pytest.fixture
def images(docker_client: docker.DockerClient, base_image: str) -> Iterator[Images]:
    made = Images(docker_client, base_image)
    yield made
    made.remove()


def test_prune_removes_only_the_active_prefixs_stale_images(
    images: Images,
    docker_client: docker.DockerClient,
    base_image: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mark = secrets.token_hex(4)
    mine, theirs = f"ssebench-d-prune-{mark}", f"ssebench-d-other-{mark}"
    current = runtime_version()
    # A layer rebuilt under the same name: the old image is left unnamed, labelled.
    replaced = images.build(mine, f"{mine}/tool/t:{current}", f"old-{mark}")
    kept = images.build(mine, f"{mine}/tool/t:{current}", f"new-{mark}")
    images.tag(kept, f"{mine}/agent-reference/t:0-old")  # the agent is at version 1
    images.tag(base_image, f"{mine}/runtime:0.0.0-old")
    images.tag(base_image, f"{mine}/case/demo/t:1")
    # A tool layer from an extension (`--tool-layer callers`): tagged with the daemon version.
    images.tag(kept, f"{mine}/tool-callers/t:0.0.0-old")
    images.tag(kept, f"{mine}/tool-callers/t:{current}")
    # Another prefix's: a replaced layer and an old runtime, which must stay.
    theirs_replaced = images.build(theirs, f"{theirs}/tool/t:{current}", f"old-{mark}-b")
    images.build(theirs, f"{theirs}/tool/t:{current}", f"new-{mark}-b")
    images.tag(base_image, f"{theirs}/runtime:0.0.0-old")
    monkeypatch.setenv("SSEBENCH_REGISTRY", mine)
    monkeypatch.setenv("SSEBENCH_HOME", str(HOME))
    runner = CliRunner()

    dry = runner.invoke(images_app, ["prune", "--dry-run", "--json"])

    assert dry.exit_code == 0, dry.output
    listed = {entry["image"]: entry for entry in json.loads(dry.stdout)}
    assert set(listed) == {
        replaced,
        f"{mine}/agent-reference/t:0-old",
        f"{mine}/runtime:0.0.0-old",
        f"{mine}/tool-callers/t:0.0.0-old",
    }
    assert listed[replaced]["reason"] == "unnamed: a rebuild replaced it"
    assert listed[f"{mine}/runtime:0.0.0-old"]["reason"] == (
        f"runtime 0.0.0-old, the current one is {current}"
    )
    assert listed[f"{mine}/tool-callers/t:0.0.0-old"]["reason"] == (
        f"runtime 0.0.0-old, the current one is {current}"
    )
    assert listed[f"{mine}/agent-reference/t:0-old"]["reason"] == (
        "agent reference 0-old, the current version is 1"
    )
    assert not any(entry["removed"] for entry in listed.values())
    assert exists(docker_client, replaced)
    assert exists(docker_client, f"{mine}/runtime:0.0.0-old")
    assert f"{mine}: would free about" in dry.stderr

    done = runner.invoke(images_app, ["prune", "--json"])

    assert done.exit_code == 0, done.output
    removed = {entry["image"]: entry for entry in json.loads(done.stdout)}
    assert set(removed) == set(listed)
    assert all(entry["removed"] for entry in removed.values())
    # Only the unnamed image went whole, freeing its own megabyte; names were just removed.
    assert removed[replaced]["size"] >= 1024 * 1024
    assert removed[f"{mine}/runtime:0.0.0-old"]["size"] == 0
    assert not exists(docker_client, replaced)
    assert not exists(docker_client, f"{mine}/runtime:0.0.0-old")
    assert not exists(docker_client, f"{mine}/agent-reference/t:0-old")
    assert not exists(docker_client, f"{mine}/tool-callers/t:0.0.0-old")
    mine_kept = [
        f"{mine}/tool/t:{current}",
        f"{mine}/case/demo/t:1",
        f"{mine}/tool-callers/t:{current}",
    ]
    for name in [base_image, kept, *mine_kept]:
        assert exists(docker_client, name), name
    for name in [theirs_replaced, f"{theirs}/runtime:0.0.0-old", f"{theirs}/tool/t:{current}"]:
        assert exists(docker_client, name), name
    assert f"{mine}: freed about 1.0 MB (4 names removed)" in done.stderr


def test_an_image_another_process_removes_while_prune_lists_them_is_no_error(
    images: Images, docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = secrets.token_hex(4)
    mine = f"ssebench-d-prune-{mark}"
    gone = images.build(mine, f"{mine}/runtime:0.0.0-old", f"gone-{mark}")
    stays = images.build(mine, f"{mine}/tool/t:0.0.0-old", f"stays-{mark}")
    listing = docker.api.client.APIClient.images

    def listed_then_removed(api: docker.APIClient, *args: object, **kwargs: object) -> object:
        # Another process (a parallel test, the user's own prune) removes one listed image.
        found = listing(api, *args, **kwargs)
        api.remove_image(gone, force=True)
        return found

    monkeypatch.setattr(docker.api.client.APIClient, "images", listed_then_removed)
    monkeypatch.setenv("SSEBENCH_REGISTRY", mine)
    monkeypatch.setenv("SSEBENCH_HOME", str(HOME))

    done = CliRunner().invoke(images_app, ["prune", "--json"])

    assert done.exit_code == 0, done.output
    listed = {entry["image"]: entry for entry in json.loads(done.stdout)}
    assert listed[f"{mine}/runtime:0.0.0-old"]["removed"] is False
    assert listed[f"{mine}/runtime:0.0.0-old"]["error"]
    assert listed[f"{mine}/tool/t:0.0.0-old"]["removed"] is True
    assert not exists(docker_client, stays)
