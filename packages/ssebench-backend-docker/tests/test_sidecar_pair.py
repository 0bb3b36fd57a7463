"""A sidecar pair on the engine: what `start` makes, how it is labelled, what `cleanup`
and a failed start leave (nothing: no container, no volume, no network).

The probe image of the conformance suite plays both containers; the runs of real
tasks are tests/sidecar/ and tests/integrity/.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import docker
import msgspec
import pytest

from ssebench.backends.docker import DockerBackend
from ssebench.spec import (
    BackendError,
    Mount,
    NetworkPolicy,
    RunSpec,
    SidecarPair,
    contract,
    labels,
)

pytestmark = pytest.mark.docker


def pair_spec(tmp_path: Path, image: str, *, environment_image: str, keep: bool = False) -> RunSpec:
    run_id = f"pair-{secrets.token_hex(4)}"
    (tmp_path / "archive").mkdir(exist_ok=True)
    env = {
        contract.ENV_API_KEY: "sk-pair-secret",
        contract.ENV_RESULTS: contract.RESULTS_DIR,
        contract.ENV_ARCHIVE: contract.ARCHIVE_DIR,
        contract.ENV_DIFFICULTY: "2",
        contract.ENV_DAEMON_SOCKET: contract.SIDECAR_DAEMON_SOCKET,
        "PROBE_MODE": "keep" if keep else "talk",
    }
    pair = SidecarPair.create(
        run_id=run_id, environment_image=environment_image, source_dir="/probe-src", env=env
    )
    return RunSpec(
        run_id=run_id,
        task_name="probe-task",
        mode="sidecar",
        image=image,
        env=env,
        results=Mount(target=contract.RESULTS_DIR, source=str(tmp_path)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(tmp_path / "archive")),
        labels={labels.RUN_ID: run_id, labels.WEBUI: "true", labels.TASK_ID: "probe-task"},
        keep=keep,
        sidecar=SidecarPair(
            run_id=pair.run_id,
            environment_image=pair.environment_image,
            source_dir=pair.source_dir,
            volumes=pair.volumes,
            env={**pair.env, "PROBE_MODE": "sleep"},
        ),
    )


def of_pair(client: docker.DockerClient, run_id: str) -> list[str]:
    wanted = {"label": f"{labels.RUN}={run_id}"}
    found = [f"container {c.name}" for c in client.containers.list(all=True, filters=wanted)]
    found += [f"volume {v.name}" for v in client.volumes.list(filters=wanted)]
    ours = {"label": f"{labels.RUN_ID}={run_id}"}
    found += [f"network {n.name}" for n in client.networks.list(filters=ours)]
    return sorted(found)


@pytest.fixture
def backend(docker_client: docker.DockerClient) -> Iterator[DockerBackend]:
    made = DockerBackend()
    yield made
    for container in docker_client.containers.list(all=True, filters={"label": f"{labels.RUN}"}):
        if container.labels.get(labels.RUN, "").startswith("pair-"):
            container.remove(force=True, v=True)
    for volume in docker_client.volumes.list(filters={"label": labels.RUN}):
        if (volume.attrs.get("Labels") or {}).get(labels.RUN, "").startswith("pair-"):
            volume.remove(force=True)


def test_a_pair_is_two_containers_and_two_volumes_labelled_as_the_seed_says(
    tmp_path: Path, probe_image: str, backend: DockerBackend, docker_client: docker.DockerClient
) -> None:
    spec = pair_spec(tmp_path, probe_image, environment_image=probe_image)
    assert spec.sidecar is not None
    handle = backend.start(spec)
    assert backend.wait(handle, timeout=60) == 0

    task = docker_client.containers.get(handle.container_id)
    assert handle.agent_container is not None
    agent = docker_client.containers.get(handle.agent_container)
    # The task container carries the run's labels and the pair's; the agent's the pair's only.
    assert {key: task.labels[key] for key in spec.labels} == spec.labels
    assert task.labels[labels.RUN] == spec.run_id
    assert {k: v for k, v in agent.labels.items() if k.startswith(labels.PREFIX)} == {
        labels.RUN: spec.run_id
    }
    assert task.attrs["Config"]["Image"] == probe_image
    # The task container never gets the model key; the agent container does.
    assert not any(entry.startswith(contract.ENV_API_KEY) for entry in task.attrs["Config"]["Env"])
    assert f"{contract.ENV_API_KEY}=sk-pair-secret" in agent.attrs["Config"]["Env"]
    assert agent.attrs["HostConfig"]["NetworkMode"] == f"container:{task.id}"
    mounts = {m["Destination"]: m.get("Name") or m["Source"] for m in agent.attrs["Mounts"]}
    assert mounts == {m["Destination"]: m.get("Name") or m["Source"] for m in task.attrs["Mounts"]}
    assert mounts["/probe-src"] == f"ssebench-{spec.run_id}-source"
    assert mounts[contract.SOCKET_DIR] == f"ssebench-{spec.run_id}-sockets"
    volumes = docker_client.volumes.list(filters={"label": f"{labels.RUN}={spec.run_id}"})
    assert len(volumes) == 2
    # ssebench runs sees one run.
    assert [run.name for run in backend.list_runs({labels.RUN_ID: spec.run_id})] == [task.name]
    assert [run.run_id for run in backend.list_runs() if run.run_id == spec.run_id] == [spec.run_id]

    backend.cleanup(handle)
    assert of_pair(docker_client, spec.run_id) == []


def test_a_kept_pair_survives_cleanup_and_remove_takes_all_of_it(
    tmp_path: Path, probe_image: str, backend: DockerBackend, docker_client: docker.DockerClient
) -> None:
    spec = pair_spec(tmp_path, probe_image, environment_image=probe_image, keep=True)
    handle = backend.start(spec)
    assert backend.wait(handle, timeout=60) == 0
    backend.cleanup(handle)
    assert len(of_pair(docker_client, spec.run_id)) == 4
    found = backend.inspect_run(spec.run_id)
    assert found is not None and found.state == "running"
    backend.remove(found.handle)
    assert of_pair(docker_client, spec.run_id) == []


@pytest.mark.parametrize("missing", ["agent", "environment"])
def test_a_pair_that_fails_to_start_leaves_nothing_behind(
    missing: str,
    tmp_path: Path,
    probe_image: str,
    backend: DockerBackend,
    docker_client: docker.DockerClient,
) -> None:
    absent = "ssebench-test/not-there:never"
    spec = pair_spec(
        tmp_path,
        absent if missing == "agent" else probe_image,
        environment_image=absent if missing == "environment" else probe_image,
    )
    with pytest.raises(BackendError) as raised:
        backend.start(spec)
    assert "sk-pair-secret" not in str(raised.value)
    assert of_pair(docker_client, spec.run_id) == []


def test_an_open_pair_leaves_no_network_either(
    tmp_path: Path, probe_image: str, backend: DockerBackend, docker_client: docker.DockerClient
) -> None:
    spec = msgspec.structs.replace(
        pair_spec(tmp_path, probe_image, environment_image=probe_image),
        network=NetworkPolicy(egress="open"),
    )
    handle = backend.start(spec)
    assert backend.wait(handle, timeout=60) == 0
    assert any(item.startswith("network ") for item in of_pair(docker_client, spec.run_id))
    backend.cleanup(handle)
    assert of_pair(docker_client, spec.run_id) == []
