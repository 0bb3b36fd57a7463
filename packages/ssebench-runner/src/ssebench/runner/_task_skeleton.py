"""`ssebench dataset new`: a task folder that validates, with comments saying what to fill in.

The skeleton is a real task in the format `ssebench dataset validate` checks:
every file its config names exists, its scripts are executable, and its
Dockerfile starts from the configured base image and fetches nothing. What it
holds is placeholder material the author replaces (docs/tasks.md).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Final

from ssebench.spec import UserError, validate_task_id
from ssebench.spec.protected import default_protected

TOOLCHAINS: Final[dict[str, str]] = {
    "c": "gcc libc6-dev make git",
    "c++": "g++ make git",
    "python": "python3 python3-pytest git",
    "go": "golang-go git",
    "rust": "cargo rustc git",
    "java": "default-jdk-headless maven git",
    "javascript": "nodejs npm git",
}
"""The languages `--language` offers, and the Debian packages their Dockerfile installs."""

_DOCKERFILE: Final = """\
# The case image: the project at its vulnerable commit, its toolchain, and the
# hidden task material under /ssebench. Builds have no network and nothing is
# pulled: start from the base image SSEBench passes, install the toolchain
# from Debian's packages, and COPY the sources from this folder.
ARG SSEBENCH_BASE_IMAGE
FROM ${{SSEBENCH_BASE_IMAGE}}
# Passed for every task; most tasks do not need it.
ARG SSEBENCH_REGISTRY

# TODO: the packages the project needs to build and test ({language}).
RUN apt-get update \\
 && apt-get install -y --no-install-recommends {packages} \\
 && rm -rf /var/lib/apt/lists/*

# TODO: put the project's sources in src/ (at the vulnerable commit). They
# become a git checkout with one commit at `source` (sse/config.yaml): the
# agent works there, and its patch is the diff against that commit.
COPY src/ {source}/
RUN cd {source} \\
 && git -c init.defaultBranch=main init -q \\
 && git config user.name "SSEBench task" \\
 && git config user.email "task@ssebench.invalid" \\
 && git add -A \\
 && git commit -q -m "{task_id}: vulnerable version"

# Hidden task material, mapped as the task format says: sse/config.yaml ->
# /ssebench/config.yaml, sse/<script> -> /ssebench/scripts/<script>, every
# other sse/<path> -> /ssebench/<path>. The agent (uid 1000) cannot read it.
COPY sse/config.yaml /ssebench/config.yaml
COPY sse/build.sh sse/run.sh sse/test.sh /ssebench/scripts/
COPY sse/pocs/ /ssebench/pocs/
COPY sse/diffs/ /ssebench/diffs/
RUN chmod 0755 /ssebench/scripts/*.sh

WORKDIR {source}
"""

_CONFIG: Final = """\
# The task's config: what the agent is told, and what grades its patch.
# Paths under `scripts` and `files` are relative to /ssebench in the image
# (sse/build.sh here is scripts/build.sh there). See docs/tasks.md.
id: {task_id}            # must be this folder's name
project: {task_id}       # TODO: the project's name
repository: TODO         # TODO: where the project comes from (a URL or a note)
language: {language}
source: {source}   # where the Dockerfile puts the checkout the agent patches
task_description:
  # TODO: what the agent is told, at least one of issue, crash_report
  # (files under sse/, e.g. reports/crash.txt) and bug_description; how much
  # of it the agent sees depends on the run's difficulty.
  issue: |
    TODO: describe the bug as its reporter would.
scripts:
  build: scripts/build.sh   # builds the project in the current directory
  run: scripts/run.sh       # runs one PoC, given as its only argument
  test: scripts/test.sh     # runs the project's tests in the current directory
files:
  patch: diffs/patch.diff        # TODO: the reference fix (a diff against `source`)
  poc:
    - pocs/poc-1                 # TODO: inputs that trigger the bug, one file each
  future_test: diffs/test.diff   # TODO: tests added with the fix (a diff), or remove
# The agent's changes to these files are dropped before every check: the tests
# (where the hidden ones go included) and how they run. Without the key the
# default for the language applies (docs/tasks.md); this list replaces it.
protected:                       # TODO: the project's test folders and runner files
  - tests/**
{protected}type: TODO                       # e.g. heap-buffer-overflow, path-traversal
reference: []                    # e.g. the advisory's URL
"""

_BUILD: Final = """\
#!/bin/bash
# Build the project in the current directory (a copy of the patched checkout).
# Exit 0 when it builds. Runs as an unprivileged user with a fresh HOME.
set -euo pipefail
echo "TODO: build the project (e.g. make)" >&2
exit 1
"""

_RUN: Final = """\
#!/bin/bash
# Usage: run.sh <poc-file>
# Run the built project on one PoC. Exit 0 when the bug did NOT trigger (the
# patch holds), non-zero while it still does. The reference patch must make
# every PoC exit 0; the unpatched project must make every PoC exit non-zero.
set -u
echo "TODO: run the project on $1 and report whether the bug triggered" >&2
exit 1
"""

_TEST: Final = """\
#!/bin/bash
# Run the project's tests in the current directory; exit 0 when they pass.
# With files.future_test, the same script also runs after that diff is applied.
set -euo pipefail
echo "TODO: run the project's tests" >&2
exit 1
"""

_PATCH: Final = """\
TODO: replace this file with the reference fix, a unified diff against the
checkout at `source` (e.g. `git diff` in the project after fixing the bug).
"""

_TEST_DIFF: Final = """\
TODO: replace this file with the tests the fix added (a unified diff), or
delete it and remove `files.future_test` from sse/config.yaml.
"""

_POC: Final = "TODO: replace this file with an input that triggers the bug.\n"

_README: Final = "TODO: put the project's sources here, at the vulnerable commit.\n"


def new_task(dataset: Path, task_id: str, language: str) -> Path:
    """Write a task skeleton to `dataset/task_id`; the folder must not exist yet.

    Returns:
        The new task folder.

    Raises:
        UserError: the ID or language is invalid, or the folder exists; nothing is written.
    """
    validate_task_id(task_id)
    if language not in TOOLCHAINS:
        allowed = ", ".join(sorted(TOOLCHAINS))
        raise UserError(f"unknown language {language!r}: use one of {allowed}")
    folder = dataset / task_id
    if folder.exists():
        raise UserError(f"{folder} exists already: choose another ID or remove it")
    dataset.mkdir(parents=True, exist_ok=True)
    if not (dataset / "dataset.yaml").exists():
        (dataset / "dataset.yaml").write_text(
            f'version: "1"\nname: {dataset.name}\n# TODO: description: what these tasks are\n'
        )
    values = {
        "task_id": task_id,
        "language": language,
        "packages": TOOLCHAINS[language],
        "source": f"/src/{task_id}",
        "protected": "".join(f'  - "{glob}"\n' for glob in default_protected(language)),
    }
    files = {
        "Dockerfile": _DOCKERFILE.format(**values),
        "src/README.md": _README,
        "sse/config.yaml": _CONFIG.format(**values),
        "sse/build.sh": _BUILD,
        "sse/run.sh": _RUN,
        "sse/test.sh": _TEST,
        "sse/diffs/patch.diff": _PATCH,
        "sse/diffs/test.diff": _TEST_DIFF,
        "sse/pocs/poc-1": _POC,
    }
    # Written beside the dataset and renamed into place, so a failure leaves nothing half-made.
    staging = dataset / f".{task_id}.new-{os.getpid()}"
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if relative.endswith(".sh"):
                path.chmod(0o755)
        staging.rename(folder)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"cannot write {folder}: {exc.strerror or exc}") from exc
    return folder
