"""What one run may use of its host: CPUs, memory, processes (docs/tasks.md `resources`).

A run gets `DEFAULT_RESOURCES` unless its task's `config.yaml` asks for more
(`resources`), and the command line (`--cpus`, `--memory`, `--pids-limit`)
overrides both. The backend enforces them on the run's containers.
"""

from __future__ import annotations

import re
from typing import Final

from ssebench.spec._base import Message, UserInput
from ssebench.spec._errors import UserError


class Resources(Message, kw_only=True, frozen=True):
    """The limits of one run's containers, as the runner records them in `config`."""

    cpus: float
    """CPUs the run may use at once (the engine's CPU quota; fractions allowed)."""
    memory: int
    """Bytes of memory, swap included (the run gets no swap beyond it)."""
    pids: int
    """Processes and threads the run may have at once."""


class TaskResources(UserInput, kw_only=True, frozen=True):
    """A task's `resources` in `config.yaml`: what it needs beyond the defaults.

    `memory` is a size such as `8g`, `512m` or a number of bytes.
    """

    cpus: float | None = None
    memory: str | int | None = None
    pids: int | None = None


GIB: Final = 1024**3

DEFAULT_RESOURCES: Final = Resources(cpus=2.0, memory=4 * GIB, pids=1024)
"""A normal task's needs: two CPUs build and test a C or Python project in minutes;
4 GiB holds a compiler, a linker and a sanitizer build (ASan doubles memory) with
room to spare; 1024 processes and threads are ten times what `make -j` with a test
runner starts, and end a fork bomb in a fraction of a second."""

_SIZE: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([bkmgt]?)i?b?", re.IGNORECASE)
_UNITS: Final = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}

MIN_MEMORY: Final = 64 * 1024**2
"""Smallest memory limit accepted: below it the runtime itself cannot start."""

MIN_PIDS: Final = 32
"""Fewest processes accepted: the entrypoint, daemon, MCP server and evaluator need a few."""


def parse_memory(value: str | int, what: str = "memory") -> int:
    """A memory size in bytes: `4g`, `512m`, `1.5G`, `1024k`, or a number of bytes.

    Raises:
        UserError: not a size, or below MIN_MEMORY.
    """
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.fullmatch(value.strip())
        if match is None:
            raise UserError(
                f"invalid {what} {value!r}: use a size such as 4g, 512m or a number of bytes"
            )
        size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if size < MIN_MEMORY:
        raise UserError(f"invalid {what} {value!r}: at least {MIN_MEMORY // 1024**2}m")
    return size


def check_cpus(value: float, what: str = "cpus") -> float:
    """`value` if it is a positive number of CPUs.

    Raises:
        UserError: zero, negative or not finite.
    """
    if not 0 < value < 1e6:
        raise UserError(f"invalid {what} {value!r}: a positive number of CPUs, e.g. 2 or 0.5")
    return float(value)


def check_pids(value: int, what: str = "pids limit") -> int:
    """`value` if it is a usable process limit.

    Raises:
        UserError: below MIN_PIDS.
    """
    if value < MIN_PIDS:
        raise UserError(f"invalid {what} {value!r}: at least {MIN_PIDS}")
    return value


def run_resources(
    task: TaskResources | None,
    *,
    cpus: float | None = None,
    memory: str | int | None = None,
    pids: int | None = None,
) -> Resources:
    """A run's limits: the defaults, raised to what the task asks, overridden by the options.

    Args:
        task: the task's `resources`, if any.
        cpus: `--cpus`, if given.
        memory: `--memory`, if given.
        pids: `--pids-limit`, if given.

    Returns:
        The limits to enforce and record.

    Raises:
        UserError: a value is malformed or too small; the message names it.
    """
    base = DEFAULT_RESOURCES
    asked = task or TaskResources()
    chosen_cpus = base.cpus
    chosen_memory = base.memory
    chosen_pids = base.pids
    if asked.cpus is not None:
        chosen_cpus = max(chosen_cpus, check_cpus(asked.cpus, "task resources.cpus"))
    if asked.memory is not None:
        chosen_memory = max(chosen_memory, parse_memory(asked.memory, "task resources.memory"))
    if asked.pids is not None:
        chosen_pids = max(chosen_pids, check_pids(asked.pids, "task resources.pids"))
    return Resources(
        cpus=check_cpus(cpus, "--cpus") if cpus is not None else chosen_cpus,
        memory=parse_memory(memory, "--memory") if memory is not None else chosen_memory,
        pids=check_pids(pids, "--pids-limit") if pids is not None else chosen_pids,
    )
