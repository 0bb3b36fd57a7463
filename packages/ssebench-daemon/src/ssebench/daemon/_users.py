"""The accounts SSEBench's in-container programs run others as: who they are, the
environment their processes get, and how every process of one is killed.

One definition for the daemon server (checks, the shell, git) and the
entrypoint (the agent). Standard library only (plus the constants of
`ssebench.spec.contract`): the entrypoint imports it and must stay small
during the agent phase.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypedDict

from ssebench.spec import contract

# Identities -----------------------------------------------------------------------


@dataclass(frozen=True)
class Identity:
    """A user processes run as."""

    name: str
    uid: int
    gid: int
    home: str


def lookup_identity(name: str) -> Identity:
    """The account `name` from the passwd database.

    Raises:
        KeyError: there is no such account.
    """
    entry = pwd.getpwnam(name)
    return Identity(name=name, uid=entry.pw_uid, gid=entry.pw_gid, home=entry.pw_dir)


def identity_of_uid(uid: int, gid: int) -> Identity:
    """The account owning `uid`, or a nameless one when the passwd database lacks it."""
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return Identity(name=str(uid), uid=uid, gid=gid, home="/nonexistent")
    return Identity(name=entry.pw_name, uid=uid, gid=entry.pw_gid, home=entry.pw_dir)


def current_identity() -> Identity:
    """This process's own user (tests run every part as it)."""
    return identity_of_uid(os.geteuid(), os.getegid())


def model_identity() -> Identity:
    """The `model` account from the image's passwd, or the contract's ids when it is missing."""
    try:
        return lookup_identity(contract.MODEL_USER)
    except KeyError:
        return Identity(
            name=contract.MODEL_USER,
            uid=contract.MODEL_UID,
            gid=contract.MODEL_UID,
            home=f"/home/{contract.MODEL_USER}",
        )


class UserArgs(TypedDict, total=False):
    """Popen's arguments for the user a child runs as."""

    user: int
    group: int
    extra_groups: list[int]
    preexec_fn: Callable[[], None]


OOM_SCORE_ADJ: Final = 1000
"""The `oom_score_adj` of every process of the agent and of the checks: the most
killable, so that inside the run's memory limit the kernel kills them before the
root services (entrypoint, daemon, evaluator, MCP server), which are at
ROOT_OOM_SCORE_ADJ. Raising needs nothing. An agent can lower its own back to 0
(never below), which gains it nothing over the services: among equals the kernel
kills the biggest."""

ROOT_OOM_SCORE_ADJ: Final = 0
"""The `oom_score_adj` of the root services: Docker starts a container's processes at
0; the kubelet starts a Burstable pod's at 1000 - 1000 x request / node memory (990
for a 256 MiB request on a 24 GiB node). In a memory cgroup's OOM the kernel scores
a process by its memory plus `oom_score_adj` thousandths of the cgroup's limit, so
at 990 against 1000 the gap is 1 % of the limit (5 MiB at 512 MiB), less than a
Python service's own memory: a fork bomb of small processes had the kernel kill a
root service and the run ended without a grade. At 0 the gap is the whole limit.
The root process lowers its own (`lower_own_oom_score`) before it starts anything;
what it starts inherits it. Going below the minimum the runtime set needs
CAP_SYS_RESOURCE: a runtime that had it when it wrote the score pins the minimum
there, one without it (this host's) leaves the minimum at 0."""

_OOM_FILE: Final = b"/proc/self/oom_score_adj"
_OWN_OOM_SCORE: Final = Path(os.fsdecode(_OOM_FILE))

NICENESS: Final = 19
"""The nice value of every process of the agent and of the checks (SCHED_IDLE too): in
the run's CPU limit the root services come first, so the process-limit watchdog
(`ssebench.daemon._pids`) gets to look while thousands of a fork bomb's processes
want the CPU. Alone in its container an agent still gets the whole limit (the CPU
is shared by weight only among what wants it). An unprivileged process cannot
lower its nice value again (RLIMIT_NICE 0)."""


def killable_as(identity: Identity) -> UserArgs:
    """Popen arguments that make the child `identity` and the first the OOM killer picks.

    Like `as_user`, but the child raises its `oom_score_adj` to OOM_SCORE_ADJ and
    lowers its CPU priority (NICENESS, SCHED_IDLE) while it is still root, then drops
    to `identity`: once it is someone else
    its /proc entry is root's (the kernel marks it not dumpable), and raising
    it later, after the exec, would leave a window in which the program's
    first children keep the old score. Every descendant inherits the score.

    Raises:
        PermissionError: this process is not root and `identity` is someone else.
    """
    if os.geteuid() != 0:
        if identity.uid != os.geteuid():
            raise PermissionError(f"only root can run processes as {identity.name}")
        return {"preexec_fn": _make_killable}
    uid, gid = identity.uid, identity.gid

    def become() -> None:
        # Runs in the child between fork and exec: system calls only, no locks.
        _make_killable()
        os.setgroups([])
        os.setregid(gid, gid)
        os.setreuid(uid, uid)

    return {"preexec_fn": become}


def _make_killable() -> None:
    _raise_oom_score()
    os.setpriority(os.PRIO_PROCESS, 0, NICENESS)
    with contextlib.suppress(OSError):  # a kernel without SCHED_IDLE: the nice value holds
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def _raise_oom_score() -> None:
    try:
        fd = os.open(_OOM_FILE, os.O_WRONLY)
    except OSError:  # a kernel without the file: nothing to raise
        return
    try:
        os.write(fd, b"%d" % OOM_SCORE_ADJ)
    finally:
        os.close(fd)


def lower_own_oom_score(file: Path = _OWN_OOM_SCORE) -> str | None:
    """Lower this process's `oom_score_adj` to ROOT_OOM_SCORE_ADJ when it is above.

    Args:
        file: the score's file (tests pass their own).

    Returns:
        One line for the log saying what it found and did; None when the score is
        already at most ROOT_OOM_SCORE_ADJ or unreadable (no such file).
    """
    try:
        found = int(file.read_text(encoding="ascii"))
    except (OSError, ValueError):
        return None
    if found <= ROOT_OOM_SCORE_ADJ:
        return None
    try:
        file.write_text(str(ROOT_OOM_SCORE_ADJ), encoding="ascii")
    except OSError as exc:
        return (
            f"oom_score_adj {found}: cannot lower it to {ROOT_OOM_SCORE_ADJ} "
            f"({exc.strerror or exc}; the runtime pinned it): in the memory limit the kernel "
            f"may kill a root service before the agent's small processes ({OOM_SCORE_ADJ})"
        )
    return (
        f"oom_score_adj {found} lowered to {ROOT_OOM_SCORE_ADJ}: in the memory limit the "
        f"kernel kills the agent's and the checks' processes ({OOM_SCORE_ADJ}) first"
    )


def as_user(identity: Identity) -> UserArgs:
    """Popen arguments that make the child `identity` with no supplementary groups.

    Raises:
        PermissionError: this process is not root and `identity` is someone else.
    """
    if os.geteuid() == 0:
        return {"user": identity.uid, "group": identity.gid, "extra_groups": []}
    if identity.uid == os.geteuid():
        return {}
    raise PermissionError(f"only root can run processes as {identity.name}")


# The environment ------------------------------------------------------------------

DEFAULT_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH for children when the image's PATH has nothing else to offer."""

PRIVATE_MARKERS: Final = (contract.RUNTIME_DIR, contract.SOCKET_DIR + "/admin", "admin.sock")
"""A variable whose value mentions one of these never reaches a child: it would point
the child at SSEBench's own Python (to import or preload from) or at the admin socket."""

RUN_SETTINGS: Final = ("SSE_", "SSEBENCH_")
"""Prefixes of the run's own settings: a child learns only those it is handed (`keep`),
so a check or the agent cannot read how the run is configured (SSE_RESULTS, ...)."""

LOADER_PREFIXES: Final = ("PYTHON", "LD_")
"""Variables that change what a program loads (PYTHONPATH, PYTHONHOME, LD_PRELOAD,
LD_LIBRARY_PATH, ...): the daemon's own settings for SSEBench's Python, never meant
for the image's programs, and a way to run code in a root-started tool."""

REPLACED: Final = frozenset(
    {contract.ENV_TIMEOUT, "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "HOSTNAME"}
)
"""Variables that describe the starting process, not the child: the account's are set
from its identity, PATH is the image's without the runtime, TIMEOUT is the agent's
time limit (handed on only with `keep`), the rest describe root's shell."""

PASSED_PREFIXES: Final = ("LANG", "LC_", "TZ", "TERM")
"""Locale and terminal settings pass even when their name is not an identifier."""

PROXY_NAMES: Final = frozenset(
    {"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}
)
"""Proxy settings always pass: in a gated network they are the way out."""


def clean_path(value: str | None) -> str:
    """PATH without relative entries or entries inside the SSEBench runtime; the
    default when nothing is left."""
    entries = [
        entry
        for entry in (value or "").split(":")
        if entry.startswith("/") and not entry.startswith(contract.RUNTIME_DIR)
    ]
    return ":".join(entries) or DEFAULT_PATH


def image_path(environ: Mapping[str, str]) -> str:
    """The image's PATH (`clean_path`) in an environment of the checker's entrypoint or
    its services, whose own PATH is root's (`contract.ROOT_PATH`), or in any other."""
    return clean_path(environ.get(contract.ENV_IMAGE_PATH) or environ.get("PATH"))


def _stripped(name: str, value: str) -> bool:
    """Whether the image's variable `name=value` is kept from a child (see the constants)."""
    if name.startswith(RUN_SETTINGS) or name in REPLACED or name in contract.SECRET_ENV:
        return True
    if name.startswith(LOADER_PREFIXES) or any(marker in value for marker in PRIVATE_MARKERS):
        return True
    # A name a shell cannot set (`A-B`, `A.B`) is not the image's configuration.
    return not (name.isidentifier() or name in PROXY_NAMES or name.startswith(PASSED_PREFIXES))


def child_env(
    base: Mapping[str, str],
    identity: Identity,
    *,
    keep: Sequence[str] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a child running as `identity` (the agent, a check, the shell, git).

    Starts from the image's environment (`base`), so toolchains the image set up
    (JAVA_HOME, GOPATH, PATH entries) keep working, and strips what the module's
    constants list: the run's settings, secrets, loader variables, anything that
    names the runtime or the admin socket, and what describes the starting
    process. HOME, USER, LOGNAME and SHELL are the identity's; PATH is the
    image's without the runtime (`image_path`).

    Args:
        base: the image's environment (the starting process's own).
        identity: whom the child runs as.
        keep: variables handed on as given when `base` has them, even secrets or
            run settings (the agent's API key and time limit); never one whose
            value names the runtime or the admin socket.
        extra: set last, as given (tests, the daemon's own additions).

    Returns:
        The environment.
    """
    env = {name: value for name, value in base.items() if not _stripped(name, value)}
    for name in keep:
        value = base.get(name)
        if value is not None and not any(marker in value for marker in PRIVATE_MARKERS):
            env[name] = value
    env.update(
        PATH=image_path(base),
        HOME=identity.home,
        USER=identity.name,
        LOGNAME=identity.name,
        SHELL="/bin/bash" if Path("/bin/bash").exists() else "/bin/sh",
    )
    if extra:
        env.update(extra)
    return env


# Killing every process of a user --------------------------------------------------


def _stop_all(uid: int, rounds: int) -> int:
    """SIGSTOP every process of `uid` until a sweep finds none it has not stopped yet;
    returns how many it stopped (a process that ended meanwhile included)."""
    stopped: set[int] = set()
    for _ in range(rounds):
        fresh = [pid for pid in processes_of(uid) if pid not in stopped]
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped.update(fresh)
    return len(stopped)


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) processes whose real, effective, saved or filesystem uid is `uid`."""
    found: list[int] = []
    me = os.getpid()
    try:
        entries = [entry.name for entry in os.scandir("/proc")]
    except OSError:
        return found
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            text = Path("/proc", name, "status").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        state = uids = ""
        for line in text.splitlines():
            if line.startswith("State:"):
                state = line[6:].strip()
            elif line.startswith("Uid:"):
                uids = line[4:]
        if state[:1] in ("Z", "X"):
            continue
        if str(uid) in uids.split():
            found.append(int(name))
    return found


def signal_group(pid: int, signum: int) -> None:
    """Send a signal to the process group (session) a child leads; gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _kill_all_as(who: Identity) -> None:
    """`kill(-1, SIGKILL)` from a child running as `who`: every process the user may
    signal, in one step that forks cannot race.

    A fork, not a new program: it needs no interpreter the user may execute, and
    the child only calls setgroups, setgid, setuid and kill before `_exit`, which
    is safe also when the daemon forks from a worker thread. While the run's process
    limit is full (a fork bomb) no fork is possible: the caller's sweeps make room.
    """
    try:
        pid = os.fork()
    except OSError:  # EAGAIN at the process limit, ENOMEM at the memory limit
        return
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgroups([])
            os.setgid(who.gid)
            os.setuid(who.uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    while True:
        try:
            os.waitpid(pid, 0)
            return
        except ChildProcessError:
            return
        except InterruptedError:  # pragma: no cover
            continue


def kill_user(
    who: Identity, *, between: Callable[[], object] | None = None, rounds: int = 200
) -> int:
    """SIGKILL every process of `who` (also those that called setsid or double-forked)
    and return once none is left.

    As root it first runs `kill(-1)` as `who`: one step that signals every process of
    the user at once, and a process with SIGKILL pending forks no more, so a fork bomb
    ends there. That needs a fork; where the process limit leaves no room for it (a
    bomb at Docker's `pids.max`), the sweeps do the work: every process of `who` is
    stopped (SIGSTOP, sweep after sweep until none is left running; a bomb refills
    each slot a kill frees, but a stopped process forks no more), then each round
    `kill(-1)` is tried again and every process a /proc sweep finds (e.g. a setuid
    program that changed its real uid) is killed by pid. Stopping alone does not end
    a bomb in a memory limit: its stopped processes keep their memory, the ones
    waiting for memory in a fork stop only once they get it, and the kernel frees it
    by killing one process at a time (k8s tier: 1939 stopped, 498 waiting, minutes
    on). It blocks: the daemon runs it in a thread.

    Args:
        who: the user; never root or this process's own.
        between: called before each round (the entrypoint, PID 1, reaps there).
        rounds: how often to sweep before giving up.

    Returns:
        How many processes were found alive at most.

    Raises:
        ValueError: `who` is root or this process's own user.
        RuntimeError: processes are still alive after every round.
    """
    if who.uid in (0, os.geteuid()):
        raise ValueError(f"refusing to kill every process of uid {who.uid}")
    seen = 0
    if os.geteuid() == 0:
        seen = len(processes_of(who.uid))
        if seen:  # the daemon calls this after every check, mostly with nobody left
            _kill_all_as(who)
    seen = max(seen, _stop_all(who.uid, rounds))
    for _ in range(rounds):
        if between is not None:
            between()
        alive = processes_of(who.uid)
        if not alive:
            return seen
        seen = max(seen, len(alive))
        if os.geteuid() == 0:
            _kill_all_as(who)
        for pid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    raise RuntimeError(f"processes of {who.name} (uid {who.uid}) survive SIGKILL")
