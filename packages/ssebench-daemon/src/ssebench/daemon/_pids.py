"""The run's process limit (`SSE_PIDS_LIMIT`), held from inside the container where the
kernel does not hold the container to it.

Docker gives each of a run's containers the limit as its cgroup's `pids.max`
(`--pids-limit`): the kernel refuses a fork beyond it. Kubernetes has no per-pod
or per-container process limit in its API; only the kubelet's node-wide
`podPidsLimit` caps a pod, a container cannot write its own cgroup (mounted
read-only), and RLIMIT_NPROC is no substitute: it counts a uid's processes in
every container of the node that shares the uid (no user-namespaced pods on
containerd 1.6), so one run's agent would use up another's. So the root process
of a run's checker (the entrypoint) runs a `PidsWatchdog`, and so does the agent
container's launcher (PID 1 there, as `model`: it ends the rest of its container with
one `kill(-1)`, which never reaches PID 1). The launcher is the agent's own user, so
there it holds an honest agent's runaway forks only; against a hostile one the
node's `podPidsLimit` is the bound (Docker's `--pids-limit` holds either container):

- when its own cgroup's `pids.max` (v2 `/sys/fs/cgroup/pids.max`, v1
  `/sys/fs/cgroup/pids/pids.max`) is at most the limit, the kernel already holds
  the container to it, and the watchdog only says so;
- otherwise a thread counts the processes and threads of the container's PID
  namespace (its own `/proc`; a run's pod does not share process namespaces)
  every `PERIOD` seconds, and when the count passes the limit it kills every
  process of the run's unprivileged users (`run_users`: the agent's `model`, the
  checks' `sse-runner`) with `kill_user`, the killer of the entrypoint and the
  daemon, which also ends what called setsid, and says so with the numbers.

What it kills is the agent (or a check), never a root service, so the run goes
on as after any agent that ended and is graded. It is not a kernel limit: between
two looks a fork bomb can grow past the limit (the node's `podPidsLimit` caps the
pod meanwhile, and a fork it refuses is EAGAIN, which `kill_user` is built for);
the next look ends it. A look costs a scan of /proc and one stat per process.

Two things make it hold a fork bomb in a small CPU limit (k8s tier: `--pids-limit
128 --cpus 0.5`, caught at 185, 490 processes killed 1.1 s after the agent
started): the agent's and the checks' processes run at nice 19 and SCHED_IDLE
(`killable_as`), so among a bomb's thousands of runnable processes the watchdog's
thread still gets the CPU it needs to look; and `kill_user` ends the bomb in one
`kill(-1)` as its user, else stops every process before it kills any, since a bomb
refills each slot a kill frees while a stopped process forks no more. Before both,
the test's runs logged no kill in minutes, with 1887 of the bomb's ~3000 processes
runnable beside the watchdog's thread. In the memory limit stopping alone was not
enough (see `kill_user`), and the root services must be the last the kernel picks
(`ROOT_OOM_SCORE_ADJ`).

Standard library only: the entrypoint imports it and stays small during the
agent phase.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from ssebench.daemon._users import (
    Identity,
    kill_user,
    lookup_identity,
    model_identity,
    processes_of,
)
from ssebench.spec import contract

PERIOD: Final = 0.1
"""Seconds between two looks: a fork bomb at two CPUs adds a few hundred processes in
that time, far below the node's podPidsLimit. Measured in a PID namespace of 22
processes: 62 ms of CPU in 20 s, 0.3 % of one CPU (an idle PID 1: 0.1 ms)."""

CGROUP_PIDS_MAX: Final = (Path("/sys/fs/cgroup/pids.max"), Path("/sys/fs/cgroup/pids/pids.max"))
"""The container's own cgroup's process limit: cgroup v2, then v1."""

KILL_ROUNDS: Final = 300
"""`kill_user`'s sweeps per user: a bomb thousands strong needs more than a few."""

Say = Callable[[str], None]


def cgroup_pids_max(files: Sequence[Path] = CGROUP_PIDS_MAX) -> str | None:
    """The first readable of `files`, stripped (`max` or a number); None when none is."""
    for path in files:
        with contextlib.suppress(OSError):
            return path.read_text(encoding="ascii", errors="replace").strip()
    return None


def count_tasks(proc: Path = Path("/proc")) -> int:
    """Processes and threads in the PID namespace `proc` shows (zombies count one).

    A process's `task/` directory has two links plus one per thread, which a stat
    reads without opening a file.
    """
    count = 0
    try:
        fd = os.open(proc, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        for entry in os.scandir(fd):
            if not entry.name.isdigit():
                continue
            try:
                # fd-relative, str paths: a third cheaper than pathlib at ten looks a second.
                links = os.stat(f"{entry.name}/task", dir_fd=fd).st_nlink
            except OSError:  # ended meanwhile
                continue
            count += max(1, links - 2)
    except OSError:
        return count
    finally:
        os.close(fd)
    return count


def run_users(model: Identity | None = None) -> list[Identity]:
    """The users whose processes the watchdog kills: the agent's (`model`) and the
    checks' (`sse-runner`, where the image has the account), never root or this
    process's own user.

    Args:
        model: the agent's account (default: the image's `model`).
    """
    users = [model or model_identity()]
    with contextlib.suppress(KeyError):
        users.append(lookup_identity(contract.RUNNER_USER))
    return [who for who in users if who.uid not in (0, os.geteuid())]


class PidsWatchdog:
    """Holds the processes and threads of this container to `limit` (see the module).

    Args:
        limit: the run's process limit.
        say: one line of the owner's log (called from the watchdog's thread too).
        users: whose processes are killed past the limit (`run_users`).
        period: seconds between two looks.
        cgroup_files: where the container's cgroup limit is read.
        kill: ends the processes of one of `users` and returns how many it found
            (default `kill_user`, which refuses this process's own user).
    """

    def __init__(
        self,
        limit: int,
        say: Say,
        users: Sequence[Identity],
        *,
        period: float = PERIOD,
        cgroup_files: Sequence[Path] = CGROUP_PIDS_MAX,
        kill: Callable[[Identity], int] | None = None,
    ) -> None:
        self.limit = limit
        self.say = say
        self.users = list(users)
        self.period = period
        self.cgroup_files = cgroup_files
        self._kill = kill or (lambda who: kill_user(who, rounds=KILL_ROUNDS))
        self.killed = 0
        """How many processes the watchdog has killed so far."""
        self._over = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Say how the limit is held; start watching unless the kernel holds it.

        Returns:
            Whether the watchdog watches.
        """
        held = cgroup_pids_max(self.cgroup_files)
        name = f"process limit {self.limit} ({contract.ENV_PIDS_LIMIT})"
        if held is not None and held.isdigit() and int(held) <= self.limit:
            self.say(f"{name}: held by the kernel (cgroup pids.max {held})")
            return False
        self.say(
            f"{name}: not held by the kernel (cgroup pids.max {held or 'unknown'}): "
            f"counting this container's processes every {self.period:g} s"
        )
        self._thread = threading.Thread(target=self._watch, name="ssebench-pids", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Stop watching (safe at any time, more than once); returns once the thread ended."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _watch(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.look()
            except Exception as exc:  # the watchdog must outlive a surprise, and say it
                self.say(f"process limit: a look failed: {type(exc).__name__}: {exc}")

    def look(self) -> int:
        """Count once; past the limit, kill every process of the run's users (`users`).

        Returns:
            How many processes it killed (at most, as `kill_user` counts them).
        """
        count = count_tasks()
        if count <= self.limit:
            self._over = False
            return 0
        alive = [who for who in self.users if processes_of(who.uid)]
        if not alive:
            if not self._over:
                names = ", ".join(who.name for who in self.users) or "nobody"
                self.say(
                    f"process limit {self.limit} passed: {count} processes and threads, "
                    f"none of them {names}'s: nothing to kill"
                )
            self._over = True
            return 0
        self._over = True
        self.say(
            f"process limit {self.limit} passed: {count} processes and threads in the "
            f"container; killing every process of {', '.join(who.name for who in alive)}"
        )
        killed: list[str] = []
        total = 0
        for who in alive:
            try:
                found = self._kill(who)
            except (RuntimeError, ValueError) as exc:  # e.g. a process stuck in the kernel
                self.say(f"process limit {self.limit}: cannot end every process: {exc}")
                continue
            total += found
            killed.append(f"{found} process(es) of {who.name} (uid {who.uid})")
        self.killed += total
        self.say(f"process limit {self.limit}: killed {', '.join(killed) or 'none'}")
        return total
