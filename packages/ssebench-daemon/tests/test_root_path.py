"""Root's PATH in the checker is the runtime's; the children of other users keep the image's."""

from __future__ import annotations

from ssebench.daemon._users import Identity, child_env, image_path
from ssebench.daemon.entrypoint._main import confine_path
from ssebench.spec import contract

IMAGE_PATH = "/usr/local/go/bin:/usr/bin:/bin"


def test_from_the_runtime_roots_path_is_the_runtimes_and_the_images_is_kept_aside() -> None:
    environ = {"PATH": IMAGE_PATH}

    confine_path(environ, python=contract.RUNTIME_PYTHON)

    assert environ == {"PATH": contract.ROOT_PATH, contract.ENV_IMAGE_PATH: IMAGE_PATH}
    # Twice (a service started by the entrypoint) changes nothing.
    confine_path(environ, python=contract.RUNTIME_PYTHON)
    assert environ[contract.ENV_IMAGE_PATH] == IMAGE_PATH


def test_outside_the_runtime_nothing_changes() -> None:
    environ = {"PATH": IMAGE_PATH}

    confine_path(environ, python="/usr/bin/python3")

    assert environ == {"PATH": IMAGE_PATH}


def test_a_child_gets_the_images_path_without_the_runtime_and_never_the_setting() -> None:
    environ = {
        "PATH": contract.ROOT_PATH,
        contract.ENV_IMAGE_PATH: f"{IMAGE_PATH}:rel:/opt/ssebench/x",
    }
    model = Identity(name="model", uid=1000, gid=1000, home="/home/model")

    env = child_env(environ, model)

    assert env["PATH"] == IMAGE_PATH
    assert contract.ENV_IMAGE_PATH not in env
    assert image_path({"PATH": IMAGE_PATH}) == IMAGE_PATH
