"""A real registry on 127.0.0.1, a second process with an empty image store, and the CLI.

The registry is Debian's docker-registry (scripts/setup-test-registry.sh installs
it), serving on a free loopback port with its storage in a temporary folder; the
engine already treats loopback registries as insecure, so nothing of its
configuration changes. The second process is skopeo, pulling into an empty
folder of its own, so a pull there proves a name resolves from the registry alone.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

HOME = Path(__file__).resolve().parents[2]
SETUP_REGISTRY = HOME / "scripts" / "setup-test-registry.sh"
PORT_ENV = "SSEBENCH_TEST_REGISTRY_PORT"
"""Pins the test registry's port (default: any free one)."""


def missing(reason: str) -> None:
    """As the root conftest's: skip, or fail under CI=true (CI must not go green by skipping)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: a missing tool is a failure, not a skip)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until(ready: object, what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what} exited with {process.returncode}: {log.read_text()[-2000:]}")
        if callable(ready) and ready():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} did not come up in 60 s: {log.read_text()[-2000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _remove_images_named_under(host: str) -> None:
    """Untag the engine's images named under `host/`: a registry on a free port gives new
    names each session, and the names kept every earlier session's images (and their
    layers) alive on the engine's disk."""
    client = docker.from_env()
    try:
        for image in client.images.list():
            for tag in image.tags:
                if tag.startswith(host + "/"):
                    client.images.remove(tag)
    finally:
        client.close()


@dataclass(frozen=True)
class Registry:
    """A running registry: its address and the image prefix of this session's tests."""

    host: str
    prefix: str
    log: Path
    """Its output: one access-log line per request (`"GET /v2/... HTTP/1.1" 200`)."""

    def url(self, path: str) -> str:
        return f"http://{self.host}{path}"


@pytest.fixture(scope="session")
def test_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """docker-registry on 127.0.0.1:<free port>, storage in a temporary folder; stopped after."""
    if shutil.which("docker-registry") is None or shutil.which("skopeo") is None:
        if os.geteuid() == 0:
            subprocess.run(["bash", str(SETUP_REGISTRY)], check=True, timeout=600)
        if shutil.which("docker-registry") is None:
            missing(f"docker-registry is not installed: run {SETUP_REGISTRY} as root")
    folder = tmp_path_factory.mktemp("registry")
    # A pinned port gives the same image names in every session, so the layers built
    # under them last session are reused instead of rebuilt (a case image runs apt).
    port = int(os.environ.get(PORT_ENV) or free_port())
    config = folder / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {folder / 'storage'}}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
    )
    log = folder / "registry.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["docker-registry", "serve", str(config)], stdout=out, stderr=subprocess.STDOUT
        )
    host = f"127.0.0.1:{port}"

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"http://{host}/v2/", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    try:
        _wait_until(answers, "docker-registry", process, log)
        # Under the session's own prefix (SSEBENCH_REGISTRY), so users of one engine stay apart.
        own = os.environ.get("SSEBENCH_REGISTRY") or "ssebench"
        yield Registry(host=host, prefix=f"{host}/{own.rsplit('/', 1)[-1]}-test", log=log)
    finally:
        _stop(process)
        if not os.environ.get(PORT_ENV):
            _remove_images_named_under(host)


@dataclass(frozen=True)
class Pulled:
    """An image pulled into an empty store: its manifest, config and layer files."""

    manifest: dict[str, Any]
    config: dict[str, Any]
    folder: Path

    @property
    def image_id(self) -> str:
        """The engine's ID of the image: the digest of its config."""
        return str(self.manifest["config"]["digest"])

    def layer_files(self) -> list[Path]:
        return [self.folder / layer["digest"].split(":", 1)[1] for layer in self.manifest["layers"]]


PullByName = Callable[[str], Pulled]


@pytest.fixture
def pull_into_empty_store(tmp_path: Path) -> PullByName:
    """Pull a name with skopeo, a process of its own, into a store that starts empty.

    skopeo keeps the manifest and every blob as the registry served them
    (`dir:`), so the files prove what the name resolves to with nothing local.
    (A second dockerd is not used: starting one removes the shared engine's docker0.)
    """
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        missing(f"skopeo is not installed: run {SETUP_REGISTRY} as root")

    def pull(name: str) -> Pulled:
        store = tmp_path / f"store-{secrets.token_hex(3)}"
        store.mkdir()
        assert list(store.iterdir()) == []
        done = subprocess.run(
            [skopeo, "copy", "--src-tls-verify=false", f"docker://{name}", f"dir:{store}"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        manifest = json.loads((store / "manifest.json").read_text())
        config_file = store / manifest["config"]["digest"].split(":", 1)[1]
        return Pulled(manifest, json.loads(config_file.read_text()), store)

    return pull


def ssebench_argv() -> list[str]:
    script = Path(sys.executable).with_name("ssebench")
    return [str(script if script.exists() else shutil.which("ssebench") or "ssebench")]


def cli_env(registry: str, **extra: str) -> dict[str, str]:
    """The environment of an `ssebench` command of these tests: their registry prefix."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("SSEBENCH_PREBUILT", "SSEBENCH_BACKEND")
    }
    return {**env, "SSEBENCH_HOME": str(HOME), "SSEBENCH_REGISTRY": registry, **extra}


def ssebench(
    *args: str, registry: str, cwd: Path, timeout: float = 1800, **extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ssebench_argv(), *args],
        cwd=cwd,
        env=cli_env(registry, **extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
