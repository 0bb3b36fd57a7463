"""`ssebench images push` to a real registry, then `ssebench run --prebuilt` from it.

One push (of the reference agent on one demo task) serves the module: its
names are the seed's, a second engine with an empty store pulls them, a run
pulls the image after the local copy is removed, and a failed pull falls back
to a local copy or ends in one line with nothing created.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import secrets
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from ssebench.backends.docker._build import DAEMON_LABEL, INPUTS_LABEL
from ssebench.backends.docker._platforms import emulated_architectures
from ssebench.spec import runtime_version

from .conftest import PullByName, Registry, free_port, ssebench

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3600)]

TASK = "tlvkit-heap-overflow"
RUN_OPTIONS = ("--difficulty", "1", "--timeout", "900", "--json")


@pytest.fixture(scope="module")
def pushed(
    test_registry: Registry, base_image: str, tmp_path_factory: pytest.TempPathFactory
) -> subprocess.CompletedProcess[str]:
    """`images push` of the reference agent on TASK, once for the module."""
    done = ssebench(
        "images", "push", "--tasks", TASK, "--agents", "reference", "--json",
        registry=test_registry.prefix, cwd=tmp_path_factory.mktemp("push"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def listing(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command printed (exit 1, nothing on stdout)."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def run_prebuilt(
    registry: str, cwd: Path, *options: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    run_id = f"prebuilt-{secrets.token_hex(3)}"
    done = ssebench(
        "run", "--task", TASK, "--agent", "reference", "--run-id", run_id, *RUN_OPTIONS,
        *options, registry=registry, cwd=cwd, **env,
    )  # fmt: skip
    return done, cwd / "results" / TASK / "none" / "reference" / run_id


def test_push_publishes_the_seeds_names_with_their_labels(
    pushed: subprocess.CompletedProcess[str], test_registry: Registry
) -> None:
    image, checker = listing(pushed)

    assert image["image"] == f"{test_registry.prefix}/agent-reference/tlvkit-heap-overflow:1"
    # The checker's image of a sandbox run: the task's tool layer, under the daemon's version.
    assert checker["image"] == f"{test_registry.prefix}/tool/{TASK}:{runtime_version()}"
    assert checker["daemon_version"] == runtime_version()
    assert image["state"] == "pushed"
    assert image["daemon_version"] == runtime_version()
    assert len(image["inputs"]) == 64
    # Progress per image, and the registry holds the tag.
    assert f"{image['image']}: pushing (daemon {runtime_version()})" in pushed.stderr
    assert f"{image['image']}: pushed ({image['digest']})" in pushed.stderr
    repository = test_registry.prefix.split("/", 1)[1] + "/agent-reference/tlvkit-heap-overflow"
    with urllib.request.urlopen(test_registry.url(f"/v2/{repository}/tags/list")) as reply:
        assert json.load(reply)["tags"] == ["1"]


def test_a_second_push_of_the_same_image_pushes_nothing(
    pushed: subprocess.CompletedProcess[str], test_registry: Registry, tmp_path: Path
) -> None:
    again = ssebench(
        "images", "push", "--tasks", TASK, "--agents", "reference", "--json",
        registry=test_registry.prefix, cwd=tmp_path,
    )  # fmt: skip

    assert again.returncode == 0, again.stderr
    assert [image["state"] for image in listing(again)] == ["up to date", "up to date"]
    assert [image["digest"] for image in listing(again)] == [
        image["digest"] for image in listing(pushed)
    ]
    assert "pushing" not in again.stderr


def test_a_second_process_with_an_empty_store_pulls_the_pushed_names(
    pushed: subprocess.CompletedProcess[str],
    test_registry: Registry,
    pull_into_empty_store: PullByName,
) -> None:
    name = f"{test_registry.prefix}/agent-reference/tlvkit-heap-overflow:1"

    pulled = pull_into_empty_store(name)

    image = listing(pushed)[0]
    assert pulled.image_id == image["id"]
    labels = pulled.config["config"]["Labels"]
    assert labels[DAEMON_LABEL] == runtime_version()
    assert labels[INPUTS_LABEL] == image["inputs"]
    for layer, path in zip(pulled.manifest["layers"], pulled.layer_files(), strict=True):
        assert "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest() == layer["digest"]


@contextlib.contextmanager
def case_images_untagged(client: docker.DockerClient, prefix: str) -> Iterator[None]:
    """The case images under `prefix` without their names for the block, named again after.

    Each is held under a name of its own meanwhile, so that removing its name never
    removes the image itself (which another test's images may not hold any more).
    """
    held = f"ssebench-held-{secrets.token_hex(3)}/case"
    names = {
        tag: str(image.id)
        for image in client.images.list()
        for tag in image.tags
        if tag.startswith(f"{prefix}/case/")
    }
    assert names, f"no case image under {prefix}"
    for number, (tag, image_id) in enumerate(names.items()):
        client.images.get(image_id).tag(held, str(number))
        client.images.remove(tag)
    try:
        yield
    finally:
        for number, (tag, image_id) in enumerate(names.items()):
            repository, version = tag.rsplit(":", 1)
            client.images.get(image_id).tag(repository, version)
            client.images.remove(f"{held}:{number}")


def test_run_prebuilt_pulls_the_image_after_the_local_one_is_removed(
    pushed: subprocess.CompletedProcess[str],
    test_registry: Registry,
    docker_client: docker.DockerClient,
    tmp_path: Path,
) -> None:
    name = listing(pushed)[0]["image"]
    docker_client.images.remove(name)
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(name)

    # Nor is the case image needed: the reference patch comes from the image the run runs.
    with case_images_untagged(docker_client, test_registry.prefix):
        done, run_dir = run_prebuilt(test_registry.prefix, tmp_path, "--prebuilt")

    assert done.returncode == 0, done.stderr
    assert f"{name}: Status: Downloaded newer image for {name}" in done.stderr
    assert json.loads(done.stdout)["patch_result"]["status"] == "passed"
    assert json.loads((run_dir / "summary.json").read_text())["patch_result"]["status"] == "passed"
    assert docker_client.images.get(name).id == listing(pushed)[0]["id"]


def test_run_prebuilt_with_the_image_local_checks_the_registry_and_downloads_nothing(
    pushed: subprocess.CompletedProcess[str], test_registry: Registry, tmp_path: Path
) -> None:
    name = listing(pushed)[0]["image"]

    done, _ = run_prebuilt(
        test_registry.prefix, tmp_path, "--platform", "linux/amd64", SSEBENCH_PREBUILT="1"
    )

    assert done.returncode == 0, done.stderr
    assert f"{name}: Status: Image is up to date for {name}" in done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith(f"{name}: layer ")]


@pytest.fixture
def unreachable_registry(docker_client: docker.DockerClient) -> Iterator[str]:
    """A prefix on a loopback port nothing listens on; its names are removed after."""
    prefix = f"127.0.0.1:{free_port()}/ssebench-d-gone"
    yield prefix
    for image in docker_client.images.list():
        for tag in image.tags:
            if tag.startswith(prefix + "/"):
                docker_client.images.remove(tag)


def test_a_failed_pull_with_a_local_copy_warns_and_runs_it(
    pushed: subprocess.CompletedProcess[str],
    unreachable_registry: str,
    docker_client: docker.DockerClient,
    tmp_path: Path,
) -> None:
    local = f"{unreachable_registry}/agent-reference/tlvkit-heap-overflow:1"
    checker = f"{unreachable_registry}/tool/{TASK}:{runtime_version()}"
    for image, name in zip(listing(pushed), (local, checker), strict=True):
        docker_client.images.get(image["id"]).tag(name)

    done, _ = run_prebuilt(unreachable_registry, tmp_path, "--prebuilt")

    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2
    for warning, name in zip(warnings, (local, checker), strict=True):
        assert warning.startswith(f"warning: cannot pull {name} (")
        assert warning.endswith("); using the copy on this machine")
    assert json.loads(done.stdout)["patch_result"]["status"] == "passed"


def test_with_neither_a_pull_nor_a_local_copy_the_run_ends_in_one_line(
    unreachable_registry: str, tmp_path: Path
) -> None:
    done, run_dir = run_prebuilt(unreachable_registry, tmp_path, "--prebuilt")

    line = one_line(done)
    name = f"{unreachable_registry}/agent-reference/tlvkit-heap-overflow:1"
    assert line.startswith(f"ssebench: image {name} cannot be pulled (")
    assert line.endswith(") and is not on this machine; publish it with `ssebench images push`")
    assert not (tmp_path / "results").exists()
    assert not run_dir.exists()


def test_a_platform_the_machine_cannot_build_for_is_refused_before_building(
    base_image: str, tmp_path: Path
) -> None:
    if "arm64" in emulated_architectures():
        pytest.skip("this machine emulates arm64, so it can build for it")

    done, _ = run_prebuilt("ssebench-d", tmp_path, "--platform", "linux/arm64")

    line = one_line(done)
    assert line.startswith(
        "ssebench: this machine (linux/amd64) cannot build images for linux/arm64: no emulator "
        "for arm64 is registered in /proc/sys/fs/binfmt_misc; run images published for it "
        "with --prebuilt"
    )
    assert not (tmp_path / "results").exists()


def test_a_prebuilt_run_for_a_platform_not_published_is_refused(
    pushed: subprocess.CompletedProcess[str], test_registry: Registry, tmp_path: Path
) -> None:
    name = listing(pushed)[0]["image"]

    done, _ = run_prebuilt(
        test_registry.prefix, tmp_path, "--prebuilt", "--platform", "linux/arm64"
    )

    assert one_line(done) == (
        f"ssebench: image {name} has no linux/arm64 variant: the registry holds it for "
        "linux/amd64 only"
    )
    assert not (tmp_path / "results").exists()


def test_push_refuses_to_replace_a_tag_holding_another_image_unless_forced(
    test_registry: Registry,
    docker_client: docker.DockerClient,
    base_image: str,
    tmp_path: Path,
) -> None:
    name = f"{test_registry.prefix}/agent-dummy/tlvkit-heap-overflow:1"
    # Another publisher's image under the name: built from other inputs, another daemon.
    other, _ = docker_client.images.build(
        fileobj=io.BytesIO(
            f"FROM {base_image}\nLABEL {DAEMON_LABEL}=0.0.0-other {INPUTS_LABEL}=other\n".encode()
        ),
        tag=name,
        pull=False,
        rm=True,
    )
    docker_client.images.push(name)
    remote = docker_client.images.get_registry_data(name).id
    docker_client.images.remove(name)
    try:
        push = ("images", "push", "--tasks", TASK, "--agents", "dummy", "--json")
        refused = ssebench(*push, registry=test_registry.prefix, cwd=tmp_path)

        # Build progress comes first; the refusal is the one error line, and the last.
        assert refused.returncode == 1, refused.stderr
        errors = [line for line in refused.stderr.splitlines() if line.startswith("ssebench:")]
        assert errors == [refused.stderr.splitlines()[-1]]
        assert errors[0] == (
            f"ssebench: the registry holds another image under {name} ({remote}); this one "
            f"carries daemon {runtime_version()}: bump the agent's version, or push with --force "
            "to replace it"
        )
        assert docker_client.images.get_registry_data(name).id == remote

        forced = ssebench(*push, "--force", registry=test_registry.prefix, cwd=tmp_path)

        assert forced.returncode == 0, forced.stderr
        (image,) = [found for found in listing(forced) if found["image"] == name]
        assert image["state"] == "replaced"
        assert docker_client.images.get_registry_data(name).id == image["digest"] != remote
    finally:
        # Removing its name above removed the image unless something else still names it.
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(other.id, force=True)


def test_push_of_sidecar_images_publishes_the_seeds_names_and_a_prebuilt_pair_runs_them(
    test_registry: Registry, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    prefix = test_registry.prefix
    done = ssebench(
        "images", "push", "--mode", "sidecar", "--tasks", TASK, "--agents", "reference",
        "--json", registry=prefix, cwd=tmp_path,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    names = {image["image"] for image in listing(done)}
    assert names == {
        f"{prefix}/agent-reference/sidecar:1",
        f"{prefix}/tool-sidecar/tlvkit-heap-overflow:{runtime_version()}",
    }
    assert {image["daemon_version"] for image in listing(done)} == {runtime_version()}
    for name in names:
        docker_client.images.remove(name)

    ran, run_dir = run_prebuilt(prefix, tmp_path, "--prebuilt", "--mode", "sidecar")

    assert ran.returncode == 0, ran.stderr
    for name in names:
        assert f"{name}: Status: Downloaded newer image for {name}" in ran.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["config"]["mode"] == "sidecar"
    assert summary["patch_result"]["status"] == "passed"


def test_push_refuses_an_unknown_mode_in_one_line(test_registry: Registry, tmp_path: Path) -> None:
    done = ssebench("images", "push", "--mode", "pair", registry=test_registry.prefix, cwd=tmp_path)

    assert one_line(done) == "ssebench: invalid mode 'pair': use sandbox, sidecar or both"


@pytest.mark.parametrize("prefix", ["ssebench", "ssebench-d", "team/ssebench"])
def test_push_refuses_a_local_prefix(prefix: str, tmp_path: Path) -> None:
    done = ssebench("images", "push", registry=prefix, cwd=tmp_path)

    assert one_line(done).startswith(f"ssebench: SSEBENCH_REGISTRY is {prefix!r}")
    assert "a local prefix: to push, set it to a registry host and prefix" in done.stderr
