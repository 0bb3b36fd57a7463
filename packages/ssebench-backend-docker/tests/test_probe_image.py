"""`DockerBackend.probe_image`: a command in a throwaway container, as model, with nothing more."""

from __future__ import annotations

import docker
import pytest

from ssebench.backends.docker import DockerBackend
from ssebench.spec import ImageUnavailableError, labels


@pytest.mark.docker
def test_a_probe_runs_as_model_without_network_capabilities_or_leftovers(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    script = (
        "id -u; id -g; id -G; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; "
        'ls /sys/class/net; echo "$PROBE"; echo to-stderr >&2'
    )

    output = DockerBackend().probe_image(base_image, ["/bin/sh", "-c", script], {"PROBE": "x y"})

    assert output.decode().split("\n") == [
        "1000",
        "1000",
        "1000",
        "CapEff:\t0000000000000000",
        "NoNewPrivs:\t1",
        "lo",  # no network but loopback
        "x y",
        "",
    ]
    left = docker_client.containers.list(all=True, filters={"label": f"{labels.PREFIX}probe"})
    assert left == []


@pytest.mark.docker
def test_a_probe_of_a_missing_image_says_so() -> None:
    with pytest.raises(ImageUnavailableError, match="No such image"):
        DockerBackend().probe_image("ssebench-k-none/missing:1", ["true"], {})
