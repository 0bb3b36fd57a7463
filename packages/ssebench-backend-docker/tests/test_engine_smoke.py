"""The Docker tier's smoke test: the engine builds FROM the base image and runs it."""

from __future__ import annotations

import io
import uuid

import docker
import pytest


@pytest.mark.docker
def test_a_tiny_image_built_from_the_base_image_runs_through_the_sdk(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    dockerfile = (
        "ARG SSEBENCH_BASE_IMAGE\n"
        "FROM ${SSEBENCH_BASE_IMAGE}\n"
        "RUN echo built-from-base > /smoke\n"
        'CMD ["cat", "/smoke"]\n'
    )
    tag = f"ssebench-test/smoke:{uuid.uuid4().hex[:12]}"
    docker_client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()),
        tag=tag,
        buildargs={"SSEBENCH_BASE_IMAGE": base_image},
        rm=True,
        pull=False,
    )
    try:
        output = docker_client.containers.run(tag, remove=True)
        assert output == b"built-from-base\n"
    finally:
        docker_client.images.remove(tag, force=True)
