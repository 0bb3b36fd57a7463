"""The pod of a sidecar run, as the backend asks the cluster for it (`_sidecar.add_pair`);
tests/k8s/backend runs such pods for real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ssebench.backends.k8s import _objects as objects
from ssebench.backends.k8s._handle import K8sRunHandle
from ssebench.backends.k8s._sidecar import (
    FILL_CONTAINER,
    KILL_TASK_FILE,
    TASK_CONTAINER,
    add_pair,
    is_sidecar,
)
from ssebench.spec import Mount, NetworkPolicy, RunSpec, SidecarPair, contract

SECRET = "sk-never-in-the-task-container"


def _pod(
    tmp_path: Path, egress: str = "restricted", *, checker: bool = False, model_key: bool = False
) -> Any:
    env = {
        contract.ENV_API_KEY: SECRET,
        contract.ENV_RESULTS: contract.RESULTS_DIR,
        contract.ENV_ARCHIVE: contract.ARCHIVE_DIR,
        contract.ENV_DIFFICULTY: "2",
        contract.ENV_DAEMON_SOCKET: contract.SIDECAR_DAEMON_SOCKET,
    }
    pair = SidecarPair.create(
        run_id="r1",
        environment_image="reg/tool-sidecar/t:1",
        source_dir="/src/p",
        env=env,
        checker=checker,
        model_key=model_key,
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


def test_a_checker_whose_plugin_uses_the_model_gets_the_runs_key_from_its_secret(
    tmp_path: Path,
) -> None:
    task, run, _ = _pod(tmp_path, checker=True, model_key=True).containers
    keyed = {e.name: e for e in task.env}[contract.ENV_API_KEY]
    assert keyed.value is None  # a reference to the run's Secret, as the agent's is
    assert keyed.value_from == {e.name: e for e in run.env}[contract.ENV_API_KEY].value_from
    plain, _, _ = _pod(tmp_path, checker=True).containers
    assert contract.ENV_API_KEY not in {e.name for e in plain.env}


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


def test_a_checkers_pod_asks_the_checker_whether_the_agent_container_lives(
    tmp_path: Path,
) -> None:
    """No probe runs a program of the agent's image: the agent container's probes are the
    kubelet's HTTP requests to the port the checker serves until the agent's kill file
    exists; the checker's own probe still looks for its kill file in its own image."""
    task, run, _ = _pod(tmp_path, checker=True).containers
    for probe in (run.liveness_probe, run.startup_probe):
        assert probe._exec is None and probe.tcp_socket is None
        assert (probe.http_get.port, probe.http_get.path) == (contract.AGENT_ALIVE_PORT, "/agent")
    assert run.liveness_probe.period_seconds == objects.PROBE_PERIOD
    assert run.liveness_probe.failure_threshold == objects.PROBE_FAILURES
    assert run.liveness_probe.termination_grace_period_seconds == contract.STOP_GRACE
    env = {e.name: e.value for e in task.env}
    assert env[contract.ENV_AGENT_KILL_FILE] == f"{objects.CONTROL_DIR}/{objects.KILL_FILE}"
    # The checker's own probe runs the sealed runtime's bash, not the image's sh.
    assert task.liveness_probe._exec.command[0] == f"{contract.RUNTIME_TOOLS}/bash"
    assert task.liveness_probe._exec.command[-1].endswith(f"/{KILL_TASK_FILE}")


def test_every_container_asks_the_registry_for_its_tags_digest_at_each_start(
    tmp_path: Path,
) -> None:
    """A republished tag (`images push --force`) must not run as what the node cached."""
    pod = _pod(tmp_path)
    containers = [*pod.containers, *(pod.init_containers or [])]
    assert {c.name for c in containers} >= {TASK_CONTAINER, FILL_CONTAINER, "policy-wait"}
    assert {c.image_pull_policy for c in containers} == {"Always"}


def test_a_checkers_pod_runs_the_agent_as_model_with_no_results_and_helpers_of_the_checker(
    tmp_path: Path,
) -> None:
    pod = _pod(tmp_path, checker=True)
    task, run, keeper = pod.containers
    assert task.command == [
        contract.RUNTIME_PYTHON,
        "-I",
        "-m",
        contract.ENTRYPOINT_MODULE,
        contract.AGENT_CONTAINER_FLAG,
    ]
    assert task.security_context.seccomp_profile.type == "RuntimeDefault"
    # The agent's: the launcher, whatever the image says, as model, nothing more.
    assert run.command == [contract.RUNTIME_PYTHON, "-I", "-m", contract.LAUNCHER_MODULE]
    assert run.args is None
    context = run.security_context
    assert (context.run_as_user, context.run_as_group, context.run_as_non_root) == (
        contract.MODEL_UID,
        contract.MODEL_UID,
        True,
    )
    assert context.allow_privilege_escalation is False
    assert context.capabilities.drop == ["ALL"]
    assert context.seccomp_profile.type == "RuntimeDefault"
    assert run.working_dir == "/src/p"
    assert contract.RESULTS_DIR not in _mounts(run)
    assert _mounts(task)[contract.RESULTS_DIR] == "results"
    # No helper runs the agent's image.
    helpers = [keeper, *pod.init_containers]
    assert {c.image for c in helpers} == {"reg/tool-sidecar/t:1"}
    # And the keeper (which the copy-out and the kill files use) runs the sealed runtime's
    # programs in it, none of the image's.
    assert keeper.command == [f"{contract.RUNTIME_TOOLS}/sleep", "infinity"]


def test_the_backend_runs_the_runtimes_tools_in_a_checkers_pod_and_names_elsewhere() -> None:
    """The copy-out's tar, the kill files' touch and the checker's SIGTERM: in a checker's
    pod the sealed runtime's; in a pod of the earlier layout (kept before it) by name."""
    checker = K8sRunHandle(run_id="r", name="r", namespace="n", pod="p", agent_timeout=60.0)
    earlier = K8sRunHandle(run_id="r", name="r", namespace="n", pod="p")
    for tool in ("tar", "touch", "bash"):
        assert checker.helper_tool(tool) == f"{contract.RUNTIME_TOOLS}/{tool}"
        assert earlier.helper_tool(tool) == tool
