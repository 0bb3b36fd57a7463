"""A task catalog through a real registry: `ssebench dataset publish`, then runs from it.

One publish of a copy of the demo dataset serves the module: its lock pins
each case image's digest, a run from the catalog pulls the case image by that
digest after the local copies are removed, a failed pull with a matching local
folder builds from it, a changed folder is refused in one line, and with no
registry configured nothing is pulled.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from ssebench.spec.catalog import TASK_FILES_LABEL, files_digest

from .conftest import HOME, Registry, free_port, ssebench

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3600)]

TASK = "tlvkit-heap-overflow"
CASE = f"case/demo/{TASK}:1"
RUN_OPTIONS = ("--agent", "reference", "--difficulty", "1", "--timeout", "900", "--json")


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command printed (exit 1, nothing on stdout)."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the demo dataset without its manifest, for this module to publish."""
    copy = tmp_path_factory.mktemp("catalog") / "demo"
    shutil.copytree(HOME / "datasets" / "demo", copy, ignore=shutil.ignore_patterns("*.json"))
    return copy


@pytest.fixture(scope="module")
def published(dataset: Path, test_registry: Registry, base_image: str) -> dict[str, Any]:
    """`dataset publish` of the copy to the test registry, once for the module."""
    done = ssebench(
        "dataset", "publish", "--local", str(dataset), "--json",
        registry=test_registry.prefix, cwd=dataset.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def run_from(
    catalog: Path, registry: str, cwd: Path, *options: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    done = ssebench(
        "run", "--catalog", str(catalog), "--task", TASK, "--run-id", "catalog-run",
        *RUN_OPTIONS, *options, registry=registry, cwd=cwd,
    )  # fmt: skip
    return done, cwd / "results" / TASK / "none" / "reference" / "catalog-run"


def test_publish_pushes_each_case_image_and_pins_its_digest_in_the_lock(
    published: dict[str, Any], dataset: Path, test_registry: Registry
) -> None:
    lock = json.loads((dataset / "images.lock.json").read_text())
    manifest = json.loads((dataset / "manifest.json").read_text())

    assert published["lock"] == str(dataset / "images.lock.json")
    assert sorted(lock["images"]) == [f"case/demo/{task['id']}:1" for task in manifest["tasks"]]
    assert lock["images"] == published["images"]
    for name, digest in lock["images"].items():
        # The registry serves that very manifest under the tag.
        repository, tag = name.rsplit(":", 1)
        path = test_registry.prefix.split("/", 1)[1] + "/" + repository
        request = urllib.request.Request(
            test_registry.url(f"/v2/{path}/manifests/{tag}"),
            method="HEAD",
            headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
        )
        with urllib.request.urlopen(request) as reply:
            assert reply.headers["Docker-Content-Digest"] == digest


def _remove_with_descendants(client: docker.DockerClient, image_id: str) -> None:
    """Remove an image and every local image built on it, children first."""
    children: dict[str, list[str]] = {}
    for image in client.images.list(all=True):
        children.setdefault(image.attrs.get("Parent") or "", []).append(str(image.id))
    order: list[str] = []

    def visit(current: str) -> None:
        for child in children.get(current, []):
            visit(child)
        order.append(current)

    visit(image_id)
    for found in order:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(found, force=True)


def _remove(client: docker.DockerClient, name: str) -> None:
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.remove(name, force=True)


def test_a_run_from_the_catalog_pulls_the_case_image_by_its_digest(
    published: dict[str, Any],
    dataset: Path,
    test_registry: Registry,
    docker_client: docker.DockerClient,
    tmp_path: Path,
) -> None:
    digest = published["images"][CASE]
    repository = f"{test_registry.prefix}/{CASE.rsplit(':', 1)[0]}"
    path = repository.split("/", 1)[1]
    case_id = docker_client.images.get(f"{test_registry.prefix}/{CASE}").id
    # By ID, with every image built on it: a tag removed alone leaves the bytes on the
    # engine, and a pull by digest then only names them again.
    _remove_with_descendants(docker_client, case_id)
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(case_id)
    served_before = test_registry.log.stat().st_size

    done, run_dir = run_from(dataset / "manifest.json", test_registry.prefix, tmp_path)

    assert done.returncode == 0, done.stderr
    assert f"{repository}@{digest}: Status: " in done.stderr
    with test_registry.log.open("rb") as log:
        log.seek(served_before)
        served = log.read().decode(errors="replace")
    # The manifest by its digest, then the image's config, whose digest is the image's ID:
    # the engine had neither. (Layers it holds under the same digest are the same bytes,
    # which it never downloads again.)
    for what in (f"manifests/{digest}", f"blobs/{case_id}"):
        assert f'"GET /v2/{path}/{what} HTTP/1.1" 200' in served, served[-3000:]
    assert "warning: cannot pull" not in done.stderr
    assert json.loads(done.stdout)["patch_result"]["status"] == "passed"
    case = docker_client.images.get(f"{test_registry.prefix}/{CASE}")
    assert f"{repository}@{digest}" in case.attrs["RepoDigests"]
    manifest = json.loads((dataset / "manifest.json").read_text())
    (entry,) = [task for task in manifest["tasks"] if task["id"] == TASK]
    assert case.labels[TASK_FILES_LABEL] == files_digest(entry["files"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["provenance"]["dataset"] == "demo"


@pytest.fixture
def unreachable_registry(docker_client: docker.DockerClient) -> Iterator[str]:
    """A prefix on a loopback port nothing listens on; its names are removed after."""
    prefix = f"127.0.0.1:{free_port()}/ssebench-catalog-gone"
    yield prefix
    for image in docker_client.images.list():
        for tag in image.tags:
            if tag.startswith(prefix + "/"):
                _remove(docker_client, tag)


def test_a_failed_pull_with_a_matching_local_folder_builds_from_it(
    published: dict[str, Any], dataset: Path, unreachable_registry: str, tmp_path: Path
) -> None:
    done, _ = run_from(dataset / "manifest.json", unreachable_registry, tmp_path)

    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    source = f"{unreachable_registry}/case/demo/{TASK}@{published['images'][CASE]}"
    assert len(warnings) == 1, done.stderr
    assert warnings[0].startswith(f"warning: cannot pull {source} (")
    assert warnings[0].endswith(f"building it from {dataset / TASK}, which matches the catalog")
    assert json.loads(done.stdout)["patch_result"]["status"] == "passed"


@pytest.fixture
def changed(published: dict[str, Any], dataset: Path, tmp_path: Path) -> Path:
    """A copy of the published catalog whose task folder has one changed file."""
    copy = tmp_path / "changed"
    shutil.copytree(dataset, copy)
    build = copy / TASK / "sse" / "build.sh"
    build.write_text(build.read_text() + "\necho changed\n")
    return copy


def test_a_changed_local_folder_is_refused_in_one_line_when_the_pull_fails(
    changed: Path, unreachable_registry: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()

    done, run_dir = run_from(changed / "manifest.json", unreachable_registry, work)

    line = one_line(done)
    assert line.startswith(f"ssebench: task {TASK} of catalog {changed / 'manifest.json'}: ")
    assert f"cannot pull {unreachable_registry}/case/demo/{TASK}@sha256:" in line
    assert line.endswith(
        f"its local folder cannot be built from: {changed / TASK} differs from the manifest: "
        "sse/build.sh changed"
    )
    assert not (work / "results").exists()
    assert not run_dir.exists()


def test_build_with_a_changed_local_folder_is_refused_without_a_pull(
    changed: Path, test_registry: Registry, tmp_path: Path
) -> None:
    done, _ = run_from(changed / "manifest.json", test_registry.prefix, tmp_path, "--build")

    assert one_line(done) == (
        f"ssebench: task {TASK} of catalog {changed / 'manifest.json'}: its local folder "
        f"cannot be built from: {changed / TASK} differs from the manifest: sse/build.sh changed"
    )
    assert not (tmp_path / "results").exists()


def test_with_no_registry_configured_nothing_is_pulled(
    published: dict[str, Any], dataset: Path, test_registry: Registry, tmp_path: Path
) -> None:
    # The session's own local prefix (no registry host): the case image is built.
    local = test_registry.prefix.split("/", 1)[1]

    done, _ = run_from(dataset / "manifest.json", local, tmp_path)

    assert done.returncode == 0, done.stderr
    assert "pull" not in done.stderr.lower()
    assert json.loads(done.stdout)["patch_result"]["status"] == "passed"
