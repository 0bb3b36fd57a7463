"""The builders against a real engine: cache reuse, partial rebuilds, failures, the commands.

An unchanged rebuild is asserted from the builder's log (every step came from
the engine's cache), never from a time.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
from typer.testing import CliRunner

from ssebench.backends.docker import (
    BuildLine,
    build_case,
    build_runtime,
    build_tool,
    build_tool_images,
    case_image_name,
)
from ssebench.backends.docker._build import INPUTS_LABEL, REGISTRY_LABEL
from ssebench.backends.docker.commands import build_case_app, images_app
from ssebench.spec import (
    ImageUnavailableError,
    Task,
    default_dataset,
    find_task,
    load_dataset,
    registry,
)
from ssebench.spec.catalog import TASK_FILES_LABEL, files_digest, task_files

from .conftest import DATASET

BUSYBOX = "ssebench-test-busybox-only"


@pytest.fixture
def scratch_dataset(
    tmp_path: Path, docker_client: docker.DockerClient, base_image: str
) -> Iterator[Path]:
    """A throw-away dataset `builders-test` holding a copy of the busybox-only task.

    Every image tagged under it is removed afterwards.
    """
    dataset = tmp_path / "builders-test"
    dataset.mkdir()
    (dataset / "dataset.yaml").write_text('version: "1"\nname: builders-test\n')
    shutil.copytree(DATASET / BUSYBOX, dataset / BUSYBOX, symlinks=True)
    yield dataset
    for image in docker_client.images.list(name="*/case/builders-test/*"):
        for tag in image.tags:
            docker_client.images.remove(tag, force=True)


@pytest.mark.docker
def test_an_unchanged_rebuild_of_runtime_case_and_tool_rebuilds_no_layer(
    docker_client: docker.DockerClient, tool_image: object, ssebench_home: Path
) -> None:
    tasks = load_dataset(default_dataset(ssebench_home))
    first = build_tool_images(docker_client, tasks, ssebench_home)
    again = build_tool_images(docker_client, tasks, ssebench_home)
    assert [image.layer for image in again] == ["runtime"] + ["case", "tool"] * len(tasks)
    assert [(image.tag, image.rebuilt) for image in again] == [(image.tag, ()) for image in again]
    assert all(image.cached for image in again)
    assert [image.image_id for image in again] == [image.image_id for image in first]
    for image in again:
        assert docker_client.images.get(image.tag).id == image.image_id


@pytest.mark.docker
def test_a_changed_task_file_rebuilds_only_the_steps_from_the_one_that_copies_it(
    docker_client: docker.DockerClient, scratch_dataset: Path
) -> None:
    task = find_task(scratch_dataset, BUSYBOX)
    build_case(docker_client, task)
    (scratch_dataset / BUSYBOX / "sse" / "helpers" / "data.txt").write_text("changed\n")
    lines: list[BuildLine] = []
    image = build_case(docker_client, task, progress=lines.append)
    rebuilt = [step.instruction for step in image.rebuilt]
    assert rebuilt[:2] == ["COPY sse/helpers/ /ssebench/helpers/", "WORKDIR /work/project"]
    # The engine's own last steps label the image with the digest of its (new) inputs,
    # the registry prefix it was built under and the digest of the task's files (one step
    # a label, in the order of their names).
    assert len(rebuilt) == 5 and rebuilt[2].startswith(f"LABEL {INPUTS_LABEL}=")
    assert rebuilt[3] == f"LABEL {REGISTRY_LABEL}={registry()}"
    files = files_digest(task_files(scratch_dataset / BUSYBOX))
    assert rebuilt[4] == f"LABEL {TASK_FILES_LABEL}={files}"
    assert docker_client.images.get(image.image_id).labels[TASK_FILES_LABEL] == files
    cached = [line.step.instruction for line in lines if line.step and line.step.cached]
    assert "COPY sse/reports/ /ssebench/reports/" in cached
    assert image.tag == case_image_name(task) == f"{registry()}/case/builders-test/{BUSYBOX}:1"


@pytest.mark.docker
def test_force_runs_every_step_again(
    docker_client: docker.DockerClient, scratch_dataset: Path
) -> None:
    task = find_task(scratch_dataset, BUSYBOX)
    build_case(docker_client, task)
    image = build_case(docker_client, task, force=True)
    ran = [step.instruction for step in image.rebuilt]
    assert any(instruction.startswith("RUN apt-get update") for instruction in ran)
    assert "COPY sse/config.yaml /ssebench/config.yaml" in ran
    assert not [step for step in image.steps if step.cached]


@pytest.mark.docker
def test_a_tool_layer_that_fails_names_the_layer_the_step_and_the_reason(
    docker_client: docker.DockerClient, runtime_image: str, scratch_dataset: Path
) -> None:
    config = scratch_dataset / BUSYBOX / "sse" / "config.yaml"
    config.write_text(config.read_text().replace("pocs/input.bin", "pocs/missing.bin"))
    # In the task folder (so the case build starts), but left out of the case image.
    (scratch_dataset / BUSYBOX / "sse" / "pocs" / "missing.bin").write_text("x\n")
    (scratch_dataset / BUSYBOX / ".dockerignore").write_text("sse/pocs/missing.bin\n")
    task: Task = find_task(scratch_dataset, BUSYBOX)
    build_case(docker_client, task)
    home = Path(__file__).resolve().parents[2]
    with pytest.raises(ImageUnavailableError) as raised:
        build_tool(docker_client, task, home)
    message = str(raised.value)
    assert message.startswith(f"tool layer (ssebench/tool/{BUSYBOX}:")
    # The last of the 12 steps is the LABEL the build adds (the runtime version it carries).
    assert "failed at step 8/12 (RUN [" in message
    assert "/ssebench/pocs/missing.bin is missing" in message


@pytest.mark.docker
def test_a_case_image_whose_dockerfile_fails_names_the_case_layer_and_its_step(
    docker_client: docker.DockerClient, base_image: str, scratch_dataset: Path
) -> None:
    dockerfile = scratch_dataset / BUSYBOX / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text().replace("COPY etc/ /out/etc/", "RUN echo broken >&2; exit 3")
    )
    with pytest.raises(ImageUnavailableError) as raised:
        build_case(docker_client, find_task(scratch_dataset, BUSYBOX))
    message = str(raised.value)
    assert message.startswith(f"case layer ({registry()}/case/builders-test/{BUSYBOX}:1) failed at")
    # 19: the Dockerfile's steps and the engine's three label steps.
    assert "step 7/19 (RUN echo broken >&2; exit 3)" in message
    assert "returned a non-zero code: 3" in message
    assert "\nbroken" in message


@pytest.mark.docker
def test_build_case_lists_its_images_as_json_and_reports_them_cached_when_unchanged(
    base_image: str,
) -> None:
    runner = CliRunner()
    args = ["--local", str(DATASET), "--tasks", BUSYBOX, "--json"]
    first = runner.invoke(build_case_app, args)
    assert first.exit_code == 0, first.output
    again = runner.invoke(build_case_app, args)
    assert again.exit_code == 0, again.output
    listing = json.loads(again.stdout)
    assert [(entry["layer"], entry["image"]) for entry in listing] == [
        ("case", f"ssebench/case/images-test/{BUSYBOX}:1")
    ]
    assert listing[0]["cached"] is True and listing[0]["rebuilt_steps"] == 0
    assert listing[0]["id"].startswith("sha256:")


@pytest.mark.docker
def test_images_build_tool_lists_runtime_case_and_tool_as_json(
    tool_image: object, runtime_image: str
) -> None:
    args = ["build-tool", "--local", str(DATASET), "--tasks", BUSYBOX, "--json"]
    result = CliRunner().invoke(images_app, args)
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    assert [(entry["layer"], entry["image"]) for entry in listing] == [
        ("runtime", runtime_image),
        ("case", f"ssebench/case/images-test/{BUSYBOX}:1"),
        ("tool", f"ssebench/tool/{BUSYBOX}:{runtime_image.rpartition(':')[2]}"),
    ]


@pytest.mark.docker
def test_images_bootstrap_base_leaves_an_existing_base_image_alone(base_image: str) -> None:
    result = CliRunner().invoke(images_app, ["bootstrap-base"])
    assert result.exit_code == 0, result.output
    assert f"base image {base_image} already exists" in result.stderr


def test_build_case_names_an_unknown_task_and_fails() -> None:
    result = CliRunner().invoke(build_case_app, ["--local", str(DATASET), "--tasks", "nope"])
    assert result.exit_code == 1
    assert "unknown task 'nope'" in result.stderr


@pytest.mark.docker
def test_a_change_to_the_daemons_source_rebuilds_only_the_runtime_steps_from_its_copy(
    docker_client: docker.DockerClient,
    runtime_image: str,
    ssebench_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    skip = shutil.ignore_patterns(".venv", "__pycache__", "tests")
    shutil.copytree(ssebench_home / "packages", home / "packages", ignore=skip)
    shutil.copytree(ssebench_home / "images", home / "images", ignore=skip)
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy2(ssebench_home / name, home / name)
    daemon = home / "packages" / "ssebench-daemon" / "src" / "ssebench" / "daemon"
    monkeypatch.setenv("SSEBENCH_REGISTRY", "ssebench-test-builders")
    monkeypatch.setenv("SSEBENCH_CACHE_DIR", str(tmp_path / "cache"))  # others' cache untouched
    try:
        # The unchanged copy first: the engine's cache of every step is then this test's
        # own, whatever removed the intermediate images of earlier builds on this engine.
        build_runtime(docker_client, home)
        # A change new to the engine: the same change made by an earlier run would now give
        # the same (reproducible) workspace tree, so every step would come from the cache.
        token = uuid.uuid4().hex
        (daemon / "_added_by_a_test.py").write_text(f"ADDED = {token!r}\n")
        image = build_runtime(docker_client, home)
        assert image.tag.startswith("ssebench-test-builders/runtime:")
        ran = [step.instruction.split()[0:2] for step in image.rebuilt]
        assert ran[0] == ["COPY", "packages/workspace/"], ran
        assert [words[0] for words in ran] == ["COPY", "RUN", "COPY", "LABEL", "LABEL"]
        probe = "import ssebench.daemon._added_by_a_test as m; print(m.ADDED)"
        output = docker_client.containers.run(
            image.tag, ["/opt/ssebench/bin/python3.11", "-I", "-c", probe], remove=True
        )
        assert output == f"{token}\n".encode()
    finally:
        for tag in docker_client.images.list(name="ssebench-test-builders/*"):
            for name in tag.tags:
                docker_client.images.remove(name, force=True)
