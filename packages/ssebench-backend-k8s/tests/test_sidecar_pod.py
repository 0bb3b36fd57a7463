"""The pod of a sidecar run, as the backend asks the cluster for it (`_sidecar.add_pair`);
tests/k8s/backend runs such pods for real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ssebench.backends.k8s import _objects as objects
from ssebench.backends.k8s._sidecar import (
    FILL_CONTAINER,
    KILL_TASK_FILE,
    TASK_CONTAINER,
    add_pair,
    is_sidecar,
)
from ssebench.spec import Mount, NetworkPolicy, RunSpec, SidecarPair, contract

SECRET = "sk-never-in-the-task-container"


def _pod(tmp_path: Path, egress: str = "restricted") -> Any:
    env = {
        contract.ENV_API_KEY: SECRET,
        contract.ENV_RESULTS: contract.RESULTS_DIR,
        contract.ENV_ARCHIVE: contract.ARCHIVE_DIR,
        contract.ENV_DIFFICULTY: "2",
        contract.ENV_DAEMON_SOCKET: contract.SIDECAR_DAEMON_SOCKET,
    }
    pair = SidecarPair.create(
        run_id="r1", environment_image="reg/tool-sidecar/t:1", source_dir="/src/p", env=env
    )
    spec = RunSpec(
        run_id="r1",
        task_name="t",
        mode="sidecar",
        sidecar=pair,
        image="reg/agent-a/sidecar:1",
        env=env,
        results=Mount(target=contract.RESULTS_DIR, source=str(tmp_path)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(tmp_path / "archive")),
        network=NetworkPolicy(egress=egress),  # type: ignore[arg-type]
    )
    job = objects.job("job-1", spec, {}, {}, {})
    add_pair(job, spec, pair)
    return job.spec.template.spec


def _mounts(container: Any) -> dict[str, str]:
    return {m.mount_path: m.name for m in container.volume_mounts}


def test_the_task_container_starts_first_with_the_pairs_environment_and_no_secret(
    tmp_path: Path,
) -> None:
    pod = _pod(tmp_path)
    assert [c.name for c in pod.containers] == [
        TASK_CONTAINER,
        objects.RUN_CONTAINER,
        objects.KEEPER_CONTAINER,
    ]
    task, run = pod.containers[0], pod.containers[1]
    assert task.image == "reg/tool-sidecar/t:1"
    assert run.image == "reg/agent-a/sidecar:1"
    assert is_sidecar(type("Pod", (), {"spec": pod})())
    # The pair's variables as values (none is secret); the run's only through its Secret.
    assert {e.name: e.value for e in task.env} == {
        contract.ENV_RESULTS: contract.RESULTS_DIR,
        contract.ENV_ARCHIVE: contract.ARCHIVE_DIR,
        contract.ENV_DIFFICULTY: "2",
        contract.ENV_DAEMON_SOCKET: contract.SIDECAR_DAEMON_SOCKET,
    }
    assert all(e.value is None and e.value_from.secret_key_ref for e in run.env)
    assert SECRET not in repr(pod)


def test_both_containers_share_results_archive_source_and_sockets_and_only_the_agents_has_more(
    tmp_path: Path,
) -> None:
    pod = _pod(tmp_path)
    task, run = pod.containers[0], pod.containers[1]
    shared = {
        contract.RESULTS_DIR: "results",
        contract.ARCHIVE_DIR: "archive",
        "/src/p": "source",
        contract.SOCKET_DIR: "sockets",
    }
    assert _mounts(task) == {**shared, objects.CONTROL_DIR: "control"}
    assert _mounts(run) == {**shared, objects.CONTROL_DIR: "control"}
    assert {v.name for v in pod.volumes if v.empty_dir is not None} >= {"source", "sockets"}
    assert pod.share_process_namespace is False


def test_the_source_volume_is_filled_from_the_task_image_after_the_policy_is_in_force(
    tmp_path: Path,
) -> None:
    pod = _pod(tmp_path)
    assert [c.name for c in pod.init_containers] == ["policy-wait", FILL_CONTAINER]
    fill = pod.init_containers[1]
    assert fill.image == "reg/tool-sidecar/t:1"
    assert fill.command[-2:] == ["/src/p", "/ssebench-fill"]
    assert _mounts(fill) == {"/ssebench-fill": "source"}
    assert [c.name for c in _pod(tmp_path, "open").init_containers] == [FILL_CONTAINER]


def test_each_container_has_its_own_kill_file(tmp_path: Path) -> None:
    pod = _pod(tmp_path)
    task, run = pod.containers[0], pod.containers[1]
    assert task.liveness_probe._exec.command[-1].endswith(f"/{KILL_TASK_FILE}")
    assert run.liveness_probe._exec.command[-1].endswith(f"/{objects.KILL_FILE}")
    assert task.liveness_probe.period_seconds == run.liveness_probe.period_seconds


def test_every_container_asks_the_registry_for_its_tags_digest_at_each_start(
    tmp_path: Path,
) -> None:
    """A republished tag (`images push --force`) must not run as what the node cached."""
    pod = _pod(tmp_path)
    containers = [*pod.containers, *(pod.init_containers or [])]
    assert {c.name for c in containers} >= {TASK_CONTAINER, FILL_CONTAINER, "policy-wait"}
    assert {c.image_pull_policy for c in containers} == {"Always"}
