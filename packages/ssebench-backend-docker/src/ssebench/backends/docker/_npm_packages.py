"""An agent's npm packages (`agent.yaml` `packages.npm`), prepared on the host.

An agent's build has no registry (docs/architecture.md), and its image may have no Node
at all, so the host installs the pinned packages with its own npm into a tree,
`node_modules/`, for the images' platform (linux/amd64, as the runtime), not the
host's: `npm install --os linux --cpu x64 --libc glibc` brings the optional
dependencies that match (OpenCode's platform binaries come that way), and
`--ignore-scripts` runs no package's code on the host. An install script a
package needs (OpenCode's only copies its platform binary into place) is the
agent's Dockerfile's business, from what the tree holds.

The tree is cached by `_agent_packages` under `<cache>/agent-packages/npm-<key>/`;
the key hashes RECIPE, the platform and the sorted pins, so a changed pin makes a
new tree and, through the agent stage's inputs digest, a new image. Versions the
pins do not fix (a package's own dependencies) are those resolved when the tree
was first made, and stay so while it is cached. The builder puts the tree into
the agent's build context as `packages/npm/node_modules/`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from ssebench.backends.docker._agent_packages import PreparedKind, Say, _cached
from ssebench.spec import ImageUnavailableError

RECIPE: Final = "2"
"""Bump when the preparation below changes, so every cached tree is redone."""

NPM_PLATFORM: Final = ("linux", "x64", "glibc")
"""npm's `--os`, `--cpu` and `--libc` for the images (linux/amd64 with glibc, as the runtime)."""

_TAIL: Final = 15
"""Lines of npm's error output a failure message carries."""


def npm_key(pins: Sequence[str]) -> str:
    """The digest that names the tree of `pins` in the cache."""
    digest = hashlib.sha256()
    for part in (RECIPE, *NPM_PLATFORM, *sorted(pins)):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def prepare_npm(pins: Sequence[str], say: Say) -> PreparedKind:
    """Install `pins` for the images' platform into a cached folder holding `node_modules/`.

    Args:
        pins: `name@version` entries, already checked by `AgentPackages`.
        say: receives one line about what is done.

    Raises:
        ImageUnavailableError: npm is missing or the install failed (the message ends
            with npm's own last lines).
    """

    def fill(folder: Path) -> None:
        npm = shutil.which("npm")
        if npm is None:
            raise ImageUnavailableError(
                "npm is needed to prepare the agent's npm packages and is not on PATH: "
                "run scripts/setup.sh (or install Debian's npm)"
            )
        say(f"npm packages: installing {', '.join(pins)} for {'/'.join(NPM_PLATFORM)}")
        folder.mkdir(parents=True)
        _install(npm, folder, pins)

    return _cached("npm", npm_key(pins), say, fill)


def _install(npm: str, folder: Path, pins: Sequence[str]) -> None:
    system, cpu, libc = NPM_PLATFORM
    args = [
        *(npm, "install", "--prefix", str(folder)),
        *("--os", system, "--cpu", cpu, "--libc", libc),
        "--ignore-scripts",  # no package's code runs on the host
        *("--no-audit", "--no-fund", "--no-package-lock", "--no-save", "--omit", "dev"),
        *("--loglevel", "error"),
        *pins,
    ]
    # The host's npm configuration (its registry, a proxy) applies, as for `npm ci`.
    env = {**os.environ, "npm_config_update_notifier": "false"}
    try:
        result = subprocess.run(
            args, cwd=folder, env=env, capture_output=True, text=True, check=False, timeout=1800
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ImageUnavailableError(f"cannot run npm: {exc}") from exc
    if result.returncode != 0 or not (folder / "node_modules").is_dir():
        tail = "\n".join(result.stderr.strip().splitlines()[-_TAIL:])
        raise ImageUnavailableError(
            f"preparing the npm packages {', '.join(pins)} failed: npm exited "
            f"{result.returncode}:\n{tail}"
        )
