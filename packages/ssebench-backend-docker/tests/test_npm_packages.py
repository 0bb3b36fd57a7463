"""agent.yaml `packages.npm`: the host's npm installs the pins for the images' platform.

The real npm runs against a registry stand-in on this host (a package document and
a tarball per package, as registry.npmjs.org serves them), so nothing leaves the
machine: a package `sse-probe` whose optional dependencies are a linux/x64 build,
a darwin/arm64 build and a linux/x64 musl build, and whose install script would
leave a mark if it ran.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ssebench.backends.docker._agent_packages import (
    agent_context,
    packages_inputs,
    prepare_packages,
)
from ssebench.backends.docker._npm_packages import npm_key, prepare_npm
from ssebench.spec import Agent, AgentPackages, ImageUnavailableError

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed"),
]

MARK = "/tmp/sse-probe-install-script-ran"


def _tarball(manifest: dict[str, Any], files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in {"package.json": json.dumps(manifest).encode(), **files}.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _packages(version: str) -> dict[str, tuple[dict[str, Any], bytes]]:
    """Each package's manifest and tarball."""
    builds = {
        "sse-probe-linux-x64": {"os": ["linux"], "cpu": ["x64"], "libc": ["glibc"]},
        "sse-probe-darwin-arm64": {"os": ["darwin"], "cpu": ["arm64"]},
        "sse-probe-linux-x64-musl": {"os": ["linux"], "cpu": ["x64"], "libc": ["musl"]},
    }
    found = {}
    for name, platform in builds.items():
        manifest = {"name": name, "version": version, **platform}
        found[name] = (manifest, _tarball(manifest, {"bin/probe": f"{name}\n".encode()}))
    main = {
        "name": "sse-probe",
        "version": version,
        "scripts": {"postinstall": f"touch {MARK}"},
        "optionalDependencies": dict.fromkeys(builds, version),
    }
    found["sse-probe"] = (main, _tarball(main, {"index.js": b""}))
    return found


class Registry:
    """A registry stand-in serving `sse-probe` 1.0.0 and 1.0.1; counts the requests."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        by_version = {version: _packages(version) for version in ("1.0.0", "1.0.1")}
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                registry.requests.append(self.path)
                base = f"http://127.0.0.1:{registry.port}"
                name, _, tail = self.path.lstrip("/").partition("/-/")
                if tail:  # a tarball: /<name>/-/<name>-<version>.tgz
                    version = tail.removeprefix(f"{name}-").removesuffix(".tgz")
                    body = by_version[version][name][1]
                    kind = "application/octet-stream"
                else:
                    versions = {}
                    for version, packages in by_version.items():
                        manifest, data = packages[name]
                        integrity = base64.b64encode(hashlib.sha512(data).digest()).decode()
                        versions[version] = {
                            **manifest,
                            "dist": {
                                "tarball": f"{base}/{name}/-/{name}-{version}.tgz",
                                "integrity": f"sha512-{integrity}",
                            },
                        }
                    document = {"name": name, "versions": versions}
                    document["dist-tags"] = {"latest": "1.0.1"}
                    body, kind = json.dumps(document).encode(), "application/json"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Registry]:
    served = Registry()
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{served.port}/")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    monkeypatch.setenv("SSEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    Path(MARK).unlink(missing_ok=True)
    yield served
    served.server.shutdown()
    Path(MARK).unlink(missing_ok=True)


def test_npm_pins_are_installed_for_linux_x64_with_their_platform_build_and_no_script(
    registry: Registry, tmp_path: Path
) -> None:
    said: list[str] = []
    prepared = prepare_npm(["sse-probe@1.0.0"], said.append)

    modules = prepared.folder / "node_modules"
    assert prepared.kind == "npm" and prepared.key == npm_key(["sse-probe@1.0.0"])
    assert json.loads((modules / "sse-probe" / "package.json").read_text())["version"] == "1.0.0"
    # The images' platform, not the host's: the linux/x64 glibc build only.
    assert (
        modules / "sse-probe-linux-x64" / "bin" / "probe"
    ).read_text() == "sse-probe-linux-x64\n"
    assert not (modules / "sse-probe-darwin-arm64").exists()
    assert not (modules / "sse-probe-linux-x64-musl").exists()
    assert not Path(MARK).exists()  # no package's code ran on the host
    assert said and "sse-probe@1.0.0" in said[0]


def test_a_prepared_tree_is_reused_and_a_changed_pin_makes_a_new_one(
    registry: Registry, tmp_path: Path
) -> None:
    first = prepare_npm(["sse-probe@1.0.0"], print)
    asked = len(registry.requests)
    again = prepare_npm(["sse-probe@1.0.0"], print)
    assert again == first and len(registry.requests) == asked  # the cache, no registry

    changed = prepare_npm(["sse-probe@1.0.1"], print)
    assert changed.key != first.key and changed.folder != first.folder
    modules = changed.folder / "node_modules"
    assert json.loads((modules / "sse-probe" / "package.json").read_text())["version"] == "1.0.1"
    # The key is part of the agent stage's inputs: a changed pin rebuilds the image.
    assert packages_inputs([first]) != packages_inputs([changed])


def test_the_tree_goes_into_the_agent_context_under_packages_npm(
    registry: Registry, tmp_path: Path
) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "Dockerfile").write_text("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\n")
    agent = Agent(
        name="a",
        version="1",
        uses_model=True,
        folder=str(folder),
        packages=AgentPackages(npm=["sse-probe@1.0.0"]),
    )

    prepared = prepare_packages(agent, print)
    context = agent_context(agent, prepared)

    assert callable(context)
    with context() as stream, tarfile.open(fileobj=stream) as tar:
        names = tar.getnames()
    assert "Dockerfile" in names
    assert "packages/npm/node_modules/sse-probe-linux-x64/bin/probe" in names


def test_a_pin_the_registry_does_not_have_fails_in_one_message_and_leaves_no_tree(
    registry: Registry, tmp_path: Path
) -> None:
    with pytest.raises(ImageUnavailableError, match=r"preparing the npm packages sse-probe@9.9.9"):
        prepare_npm(["sse-probe@9.9.9"], print)

    assert list((tmp_path / "cache" / "agent-packages").iterdir()) == []


def test_without_npm_the_builder_says_what_to_install(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")

    with pytest.raises(ImageUnavailableError, match=r"npm is needed .* run scripts/setup\.sh"):
        prepare_npm(["sse-probe@1.0.0"], print)
