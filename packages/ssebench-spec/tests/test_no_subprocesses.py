"""The unit tiers of spec, runner and runs start no process: the root conftest refuses each way.

These tests live in a unit tier, so the refusal is on for all but the last one.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys

import pytest

REFUSED = "a unit test starts no process"


def test_subprocess_run_is_refused() -> None:
    with pytest.raises(RuntimeError, match=REFUSED):
        subprocess.run(["true"], check=False)


def test_os_system_is_refused() -> None:
    with pytest.raises(RuntimeError, match=REFUSED):
        os.system("true")


def test_posix_spawn_is_refused() -> None:
    with pytest.raises(RuntimeError, match=REFUSED):
        os.posix_spawn("/bin/true", ["true"], dict(os.environ))


def test_fork_is_refused() -> None:
    with pytest.raises(RuntimeError, match=REFUSED):
        if os.fork() == 0:  # only if the refusal failed: the child leaves at once
            os._exit(0)


def test_exec_is_refused() -> None:
    # Were it not refused, exec would replace the whole test run: make that run fail loudly.
    fail = "raise SystemExit('os.execv was not refused: the test run was replaced')"
    with pytest.raises(RuntimeError, match=REFUSED):
        os.execv(sys.executable, [sys.executable, "-c", fail])


def test_asyncio_subprocesses_are_refused() -> None:
    async def start() -> None:
        await asyncio.create_subprocess_exec("true")

    with pytest.raises(RuntimeError, match=REFUSED):
        asyncio.run(start())


def test_multiprocessing_spawn_is_refused() -> None:
    process = multiprocessing.get_context("spawn").Process(target=print)
    with pytest.raises(RuntimeError, match=REFUSED):
        process.start()


@pytest.mark.process
def test_a_test_marked_process_may_start_one() -> None:
    done = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
    assert done.stdout == "42\n"
