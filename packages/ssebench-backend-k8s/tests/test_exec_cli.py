"""The exec client's local half: its command line, and the two scripts it runs in the
container, run here under bash (the cluster half is in tests/k8s: the conformance
suite's exec checks and test_sidecar.py)."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
from pathlib import Path

import pytest

from ssebench.backends.k8s import K8sRunHandle, KubernetesBackend
from ssebench.backends.k8s._exec_cli import _STAGE, WRAPPER, _parse
from ssebench.spec import BackendError

VALUE = "sk-" + secrets.token_hex(8) + "\nsecond line = with an equals sign"


def _handle(sidecar: bool) -> K8sRunHandle:
    return K8sRunHandle(run_id="r", name="job", namespace="ns", pod="pod-1", sidecar=sidecar)


def test_the_command_line_names_variables_and_never_carries_their_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("{}")
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.setenv("PASSED", VALUE)
    argv = KubernetesBackend().exec_argv(
        _handle(False), ["sh", "-c", "echo"], user="model", tty=True, env_names=["PASSED"]
    )
    assert all(VALUE not in arg for arg in argv)
    args = _parse(argv[argv.index("-m") + 2 :])
    assert (args.namespace, args.pod, args.container) == ("ns", "pod-1", "run")
    assert (args.user, args.tty, args.stdin, args.env) == ("model", True, False, ["PASSED"])
    # The caller may run it with an environment of its own: the cluster is named.
    assert args.kubeconfig == str(config)
    assert args.command == ["sh", "-c", "echo"]


@pytest.mark.parametrize(
    ("sidecar", "role", "container"),
    [
        (False, "task", "run"),
        (False, "agent", "run"),
        (True, "task", "task"),
        (True, "agent", "run"),
    ],
)
def test_the_container_is_the_task_container_by_default_and_the_agents_on_request(
    sidecar: bool, role: str, container: str
) -> None:
    argv = KubernetesBackend().exec_argv(_handle(sidecar), ["true"], container=role)  # type: ignore[arg-type]
    assert _parse(argv[argv.index("-m") + 2 :]).container == container


@pytest.mark.parametrize("user", ["root", "0", "0:0", "model:root", "1000:0", "nobody"])
def test_a_checker_pairs_agent_container_refuses_every_user_but_model(user: str) -> None:
    handle = K8sRunHandle(
        run_id="r", name="job", namespace="ns", pod="pod-1", sidecar=True, agent_timeout=60.0
    )
    backend = KubernetesBackend()
    with pytest.raises(BackendError, match=f"runs model only, never {user!r}"):
        backend.exec_argv(handle, ["id"], user=user, container="agent")
    for allowed in (None, "model", "1000", "1000:1000", "model:model"):
        backend.exec_argv(handle, ["id"], user=allowed, container="agent")
    # The checker is root's, and a pod of the earlier layout had no checker to guard.
    backend.exec_argv(handle, ["id"], user=user, container="task")
    backend.exec_argv(_handle(True), ["id"], user=user, container="agent")


@pytest.mark.parametrize("name", ["", "A=B", "1X", "A B", "X;rm"])
def test_a_variable_name_that_is_not_one_is_refused(name: str) -> None:
    with pytest.raises(BackendError, match="invalid environment variable name"):
        KubernetesBackend().exec_argv(_handle(False), ["true"], env_names=[name])


def _stage(folder: Path, values: dict[str, str]) -> None:
    payload = b"".join(f"{k}={v}".encode() + b"\0" for k, v in values.items())
    subprocess.run(
        ["/bin/sh", "-c", _STAGE, "stage", str(folder), str(len(payload))],
        input=payload + b"the user's own input, not the stage's",
        check=True,
    )


@pytest.mark.process
def test_the_stage_keeps_the_values_root_only_and_refuses_a_folder_that_exists(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "staged"
    _stage(folder, {"PASSED": VALUE})
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "env").stat().st_mode) == 0o600
    assert (folder / "env").read_bytes() == f"PASSED={VALUE}".encode() + b"\0"
    with pytest.raises(subprocess.CalledProcessError):
        _stage(folder, {"OTHER": "x"})
    assert (folder / "env").read_bytes() == f"PASSED={VALUE}".encode() + b"\0"


def _wrap(user: str, workdir: str, folder: str, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", "-c", WRAPPER, "ssebench-exec", user, workdir, folder, *command],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
        check=False,
    )


@pytest.mark.process
def test_the_wrapper_exports_the_values_removes_them_and_runs_the_command_unparsed(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "staged"
    _stage(folder, {"PASSED": VALUE, "OTHER": "two"})
    done = _wrap("", "/tmp", str(folder), "printf", "%s|%s|%s|", "$PASSED", "; id")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "$PASSED|; id||"
    assert not folder.exists()
    _stage(folder, {"PASSED": VALUE})
    done = _wrap("", "/tmp", str(folder), "sh", "-c", 'printf %s "$PASSED"; pwd')
    assert done.stdout == VALUE + "/tmp\n"


@pytest.mark.process
@pytest.mark.skipif(os.geteuid() != 0, reason="switching user needs root")
def test_the_wrapper_drops_to_the_user_with_its_groups_and_home() -> None:
    done = _wrap("nobody", "/", "", "sh", "-c", 'echo "$(id -un) $(id -gn) $HOME"; id -G')
    assert done.returncode == 0, done.stderr
    name, group, home = done.stdout.splitlines()[0].split()
    assert (name, group) == ("nobody", "nogroup")
    assert home == "/nonexistent"
    assert "0" not in done.stdout.splitlines()[1].split()


@pytest.mark.process
def test_the_wrapper_refuses_a_user_the_container_lacks_with_126() -> None:
    done = _wrap("no-such-user-here", "/", "", "true")
    assert done.returncode == 126
    assert "there is no user no-such-user-here in the container" in done.stderr
