"""Issue 13, hole 5: the host run directory takes what the agent made.

Rule (docs/integrity.md): what reaches the host is tamed: no links out of the run
directory, no setuid/setgid or world-write bits, output and files capped with a
marker, control characters stripped before a terminal.

One run of the `untamed` agent: links and special bits planted in its archive and
its tree, then 24 MiB of output laced with escape sequences.
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssebench.spec import contract

from .conftest import PYARCHIVE, Finished, Runs

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(900)]

FLOOD = 24 << 20
"""What the agent prints (agents/untamed/agent.py)."""

LOG_MARGIN = 64 << 10
"""What agent.log may hold beyond the limit: the marker line and the like."""

SPECIAL = stat.S_ISUID | stat.S_ISGID


def cli_bound(limit: int) -> int:
    """What the CLI's stderr may hold: the capped output, an eighth more for control
    characters shown escaped rather than dropped, a MiB for builds and the
    entrypoint's lines."""
    return limit + limit // 8 + (1 << 20)


@pytest.fixture(scope="module")
def untamed(runs: Runs) -> Finished:
    done = runs.run(PYARCHIVE, "untamed", difficulty=4)
    assert done.returncode == 0, done.why()
    return done


def entries(top: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """`top` and everything below it, links not followed."""
    yield top, top.lstat()
    for folder, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            yield path, path.lstat()


def test_no_link_in_the_archive_leads_out_of_it(untamed: Finished) -> None:
    """Hole 5: links the agent planted in $SSE_ARCHIVE (to /etc/passwd, /etc, /root, the
    grade) are not links in the host's archive/. Rule: what reaches the host is tamed."""
    assert untamed.report()["links"]
    links = {
        str(path.relative_to(untamed.archive)): str(path.readlink())
        for path, info in entries(untamed.archive)
        if stat.S_ISLNK(info.st_mode)
    }
    assert links == {}


def test_no_setuid_setgid_or_world_write_bit_reaches_the_archive(untamed: Finished) -> None:
    """Hole 5: setuid, setgid and world-write bits the agent set in $SSE_ARCHIVE are
    gone in the host's archive/. Rule: what reaches the host is tamed."""
    bits = {
        str(path.relative_to(untamed.run_dir)): oct(stat.S_IMODE(info.st_mode))
        for path, info in entries(untamed.archive)
        if not stat.S_ISLNK(info.st_mode) and info.st_mode & (SPECIAL | stat.S_IWOTH)
    }
    assert bits == {}


def test_source_tarball_members_are_roots_without_special_bits(untamed: Finished) -> None:
    """Hole 5: source.tar.gz holds the agent's setuid/setgid files, owned by uid/gid 0
    and without special bits. Rule: what reaches the host is tamed."""
    with tarfile.open(untamed.run_dir / "source.tar.gz") as tar:
        members = tar.getmembers()
    names = {Path(member.name).name for member in members}
    assert {"tools-setuid.sh", "tools-setgid.sh", "shared"} <= names, sorted(names)
    wrong = {
        member.name: (member.uid, member.gid, oct(member.mode))
        for member in members
        if (member.uid, member.gid) != (0, 0) or member.mode & (SPECIAL | stat.S_ISVTX)
    }
    assert wrong == {}


def test_the_agents_output_is_capped_with_a_marker_and_tamed_for_the_terminal(
    untamed: Finished,
) -> None:
    """Hole 5: 24 MiB of agent output leave agent.log within
    `contract.AGENT_OUTPUT_LIMIT` (plus a small margin) and the CLI's stderr bounded,
    both marked with `contract.OUTPUT_CAP_MARKER`; no raw escape character reaches
    the terminal. Rule: what reaches the host is tamed."""
    limit = getattr(contract, "AGENT_OUTPUT_LIMIT", 16 << 20)
    assert cli_bound(limit) < FLOOD, "the flood must exceed what may reach the terminal"
    log = untamed.run_dir / "agent.log"
    size = log.stat().st_size
    assert size <= limit + LOG_MARGIN, f"agent.log holds {size} bytes (limit {limit})"
    cli = len(untamed.stderr)
    assert cli <= cli_bound(limit), f"the CLI printed {cli} bytes on stderr (limit {limit})"
    assert b"\x1b" not in untamed.stderr, "raw escape characters reached the terminal"
    marker = getattr(contract, "OUTPUT_CAP_MARKER", None)
    assert isinstance(marker, str) and marker, "contract.OUTPUT_CAP_MARKER is missing"
    with log.open("rb") as file:
        file.seek(max(0, size - LOG_MARGIN))
        assert marker.encode() in file.read(), "agent.log does not end with the cap's marker"
    assert marker.encode() in untamed.stderr, "the CLI does not show the cap's marker"
