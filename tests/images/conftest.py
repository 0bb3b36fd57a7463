"""Fixtures of the image tests: running commands in containers, the synthetic dataset."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import docker
import pytest

from ssebench.conformance import Ran, run_in_image

DATASET = Path(__file__).resolve().parent / "dataset"
"""Synthetic case images: a busybox-only image and a Debian image with another uid-1000 user."""

RUNTIME_PYTHON = "/opt/ssebench/bin/python3.11"

# Facts about paths, printed as JSON by the runtime's own Python (so it works in
# images without stat, find or id).
STAT_PROBE = r"""
import grp, json, os, pwd, stat, sys

def name(lookup, number):
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)

facts = {}
for path in sys.argv[1:]:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        facts[path] = None
        continue
    facts[path] = {
        "user": name(pwd.getpwuid, info.st_uid),
        "group": name(grp.getgrgid, info.st_gid),
        "mode": oct(stat.S_IMODE(info.st_mode)),
        "kind": "link" if stat.S_ISLNK(info.st_mode) else "dir" if stat.S_ISDIR(info.st_mode)
        else "file",
    }
print(json.dumps(facts))
"""


Run = Callable[..., Ran]


@pytest.fixture(scope="session")
def run(docker_client: docker.DockerClient) -> Run:
    """`run(image, argv, user=None, workdir=None)`: run a command in a fresh container, no network.

    `argv` replaces the image's entrypoint (the tool layer's is the SSEBench entrypoint).
    """

    def run_command(
        image: str, argv: Sequence[str], *, user: str | None = None, workdir: str | None = None
    ) -> Ran:
        return run_in_image(docker_client, image, argv, user=user, workdir=workdir, label="images")

    return run_command


StatPaths = Callable[[str, Sequence[str]], dict[str, Any]]


@pytest.fixture(scope="session")
def stat_paths(run: Run) -> StatPaths:
    """`stat_paths(image, paths)`: owner, group, mode and kind of each path (None if missing)."""

    def probe(image: str, paths: Sequence[str]) -> dict[str, Any]:
        facts: dict[str, Any] = json.loads(
            run(image, [RUNTIME_PYTHON, "-I", "-c", STAT_PROBE, *paths]).ok()
        )
        return facts

    return probe
