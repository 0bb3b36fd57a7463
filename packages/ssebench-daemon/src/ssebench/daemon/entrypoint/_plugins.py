"""The run's plugins inside the container: each at its hook, as its user, killed at its timeout.

The runner mounts the chosen plugin folders read-only at `contract.PLUGINS_DIR`
with a plan (`contract.PLUGINS_PLAN`); no such folder means no plugins.

Plugins of `before-agent`, `on-agent` and `after-agent` are agent code: they
run as `model` exactly as the agent does (`killable_as`, the agent's
environment, the source tree as working directory), so every integrity rule
that binds the agent binds them: they end before the agent phase ends, every
`model` process is killed after each of their hooks, and their results folder
is in the archive (`model`'s), never in the results directory. Plugins of
`before-grading`, `on-grading` and `after-grading` run as root after the agent
phase: `before-grading` only once the daemon has taken the agent's diff, so
nothing they do to the source tree reaches the grade. The model key
(`SSE_API_KEY`, `SSE_BASE_URL`, `SSE_MODEL_NAME`) reaches a plugin only when
its plan says `llm`; for `model` plugins that is no boundary (an `on-agent`
plugin runs beside the agent as its user and can read its environment); the
key spends only the run's budget either way.

A plugin never changes the grade or the container's exit status: its outcome
is recorded beside them (`contract.PLUGIN_RESULTS_FILE`), the exit status is
the agent's, and a `result.json` an `after-grading` plugin changed is put back
as the evaluator wrote it (and the plugin recorded as `failed`). Each plugin runs
in its own session and is killed with its process group at its timeout; its
output goes, capped like the agent's, to `plugins/<name>.log`.

Standard library only, like the rest of the entrypoint until grading.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ssebench.daemon._users import image_path, kill_user, killable_as, signal_group
from ssebench.daemon.entrypoint._agent import Relay, agent_env
from ssebench.daemon.entrypoint._files import open_log, write_marker
from ssebench.daemon.entrypoint._procs import Children, Wakeup
from ssebench.daemon.entrypoint._services import service_env
from ssebench.daemon.entrypoint._settings import Settings
from ssebench.spec import contract

HOOKS: Final = (
    "before-agent",
    "on-agent",
    "after-agent",
    "before-grading",
    "on-grading",
    "after-grading",
)
"""Every hook, in the order a run reaches them (`ssebench.spec.HOOKS`)."""

MODEL_HOOKS: Final = frozenset(HOOKS[:3])
"""Hooks whose plugins run as `model`."""

MODEL_ENV: Final = (contract.ENV_API_KEY, contract.ENV_BASE_URL, contract.ENV_MODEL_NAME)
"""What only a plugin with `llm` gets."""

WRAPPER: Final = 'mkdir -p -- "$SSE_PLUGIN_OUT" || exit 126; exec "$0" "$@"'
"""`sh -c` prologue: the plugin's results folder is made by the plugin's own user (for a
`model` plugin inside the archive, where root must not follow the agent's links)."""

Say = Callable[[str], None]


@dataclass(frozen=True)
class Plugin:
    """One plugin of the plan."""

    name: str
    hook: str
    llm: bool
    timeout: float

    @property
    def as_model(self) -> bool:
        """Whether it runs as `model`."""
        return self.hook in MODEL_HOOKS


def load_plan(folder: Path) -> list[Plugin]:
    """The plugins of the run, from the runner's plan in `folder` ([] when there is none).

    Raises:
        ValueError: the plan is unreadable or malformed.
    """
    try:
        raw = json.loads((folder / contract.PLUGINS_PLAN).read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the plugins' plan: {exc}") from exc
    if not isinstance(raw, list):
        raise ValueError("the plugins' plan is not a list")
    plan = []
    for entry in raw:
        try:
            name, hook, llm, timeout = entry["name"], entry["hook"], entry["llm"], entry["timeout"]
        except (TypeError, KeyError) as exc:
            raise ValueError(f"a plugin of the plan lacks {exc}") from exc
        valid = (
            isinstance(name, str)
            and name.replace("-", "").isalnum()
            and hook in HOOKS
            and isinstance(llm, bool)
            and isinstance(timeout, int | float)
            and timeout > 0
        )
        if not valid:
            raise ValueError(f"a plugin of the plan is malformed: {entry!r}")
        plan.append(Plugin(name=name, hook=hook, llm=llm, timeout=float(timeout)))
    return plan


@dataclass
class _Running:
    """A started plugin: its process, output relay and deadline."""

    plugin: Plugin
    proc: subprocess.Popen[bytes]
    relay: Relay
    pipe: int
    log: int
    started: float
    deadline: float
    timed_out: bool = False


@dataclass
class Plugins:
    """The run's plugins: started at their hooks, watched, and recorded."""

    settings: Settings
    children: Children
    wakeup: Wakeup
    say: Say
    plan: list[Plugin] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    beside: list[_Running] = field(default_factory=list)
    source: str = "/"

    @classmethod
    def load(cls, settings: Settings, children: Children, wakeup: Wakeup, say: Say) -> Plugins:
        """The plugins the runner mounted (none when it mounted none, or the plan is bad)."""
        try:
            plan = load_plan(Path(contract.PLUGINS_DIR))
        except ValueError as exc:
            say(f"running no plugin: {exc}")
            plan = []
        return cls(settings, children, wakeup, say, plan)

    def of(self, hook: str) -> list[Plugin]:
        """The plugins of `hook`, in the plan's order."""
        return [plugin for plugin in self.plan if plugin.hook == hook]

    # -- one hook ------------------------------------------------------------------

    def run_hook(self, hook: str, *, guard: Path | None = None) -> None:
        """Run the plugins of `hook` one after another, each to its end or its timeout.

        Args:
            hook: a hook whose plugins run in turn (not `on-*`).
            guard: a file no plugin may change (`result.json`): put back as it was
                when one did, and that plugin recorded as `failed`.
        """
        plugins = self.of(hook)
        for plugin in plugins:
            if self.wakeup.stopping:
                self._skip(plugin, "the run was stopped before it ran")
                continue
            before = _read(guard) if guard is not None else None
            running = self._start(plugin)
            if running is None:
                continue
            while running.proc.returncode is None and not self.wakeup.stopping:
                self.children.reap()
                if running.proc.returncode is not None:
                    break
                left = running.deadline - time.monotonic()
                if left <= 0:
                    running.timed_out = True
                    break
                fds = [running.pipe] if running.relay.open else []
                if self.wakeup.wait(min(left, 1.0), fds):
                    running.relay.pump()
            self._end(running, "")
            if guard is not None and before is not None and _read(guard) != before:
                _restore(guard, before)
                self.results[plugin.name].update(
                    outcome="failed", reason=f"it changed {guard.name}, which was put back"
                )
                self.say(f"plugin {plugin.name} changed {guard.name}: put back as graded")
        if plugins and hook in MODEL_HOOKS:
            self.kill_model()

    def skip_hook(self, hook: str, reason: str) -> None:
        """Record every plugin of `hook` as `skipped` for `reason`, running none."""
        for plugin in self.of(hook):
            self._skip(plugin, reason)

    def start_beside(self, hook: str) -> None:
        """Start every plugin of `hook` (`on-agent`, `on-grading`); `fds`, `service`
        and `end_beside` watch them from the loop they run beside."""
        for plugin in self.of(hook):
            if self.wakeup.stopping:
                self._skip(plugin, "the run was stopped before it ran")
                continue
            running = self._start(plugin)
            if running is not None:
                self.beside.append(running)

    def fds(self) -> list[int]:
        """The output pipes of the plugins beside the agent or the evaluator."""
        return [running.pipe for running in self.beside if running.relay.open]

    def service(self, readable: Sequence[int] = ()) -> None:
        """Copy their output; kill each one past its timeout with its process group."""
        now = time.monotonic()
        for running in self.beside:
            if running.pipe in readable:
                running.relay.pump()
            due = now >= running.deadline and not running.timed_out
            if due and running.proc.returncode is None:
                running.timed_out = True
                signal_group(running.proc.pid, signal.SIGKILL)
                self.say(f"plugin {running.plugin.name} killed at its timeout")

    def end_beside(self, why: str) -> None:
        """End the plugins beside the phase that ended (`why`); record each."""
        for running in self.beside:
            self._end(running, why)
        self.beside = []

    # -- processes -----------------------------------------------------------------

    def _start(self, plugin: Plugin) -> _Running | None:
        settings = self.settings
        if plugin.llm and not settings.environ.get(contract.ENV_API_KEY):
            self._skip(plugin, "it uses the model (llm) and the run has none (--model)")
            return None
        folder = Path(contract.PLUGINS_DIR, plugin.name)
        out = (
            settings.archive_dir if plugin.as_model else settings.results_dir
        ) / contract.PLUGINS_RESULTS
        try:
            logs = settings.results_dir / contract.PLUGINS_RESULTS
            with contextlib.suppress(FileExistsError):
                logs.mkdir(mode=0o755)
            log = open_log(logs, f"{plugin.name}.log")
        except OSError as exc:
            self._record(plugin, "error", f"cannot make its log: {exc}", ran=False, log=False)
            return None
        env = self._env(plugin, folder, out / plugin.name)
        user: dict[str, object] = {}
        if plugin.as_model and os.geteuid() == 0:
            user = dict(killable_as(settings.model))
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(read_fd, False)
        started = time.monotonic()
        try:
            proc = self.children.spawn(
                ["/bin/sh", "-c", WRAPPER, str(folder / contract.PLUGIN_SCRIPT), str(folder)],
                cwd=self.source if plugin.as_model else "/",
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
                close_fds=True,
                umask=0o022,
                **user,
            )
        except OSError as exc:
            os.close(write_fd)
            os.close(read_fd)
            os.close(log)
            self._record(plugin, "error", f"cannot start it: {exc.strerror or exc}", ran=False)
            return None
        os.close(write_fd)
        self.say(
            f"plugin {plugin.name} ({plugin.hook}) started as "
            f"{settings.model.name if plugin.as_model else 'root'}: pid {proc.pid}, "
            f"timeout {plugin.timeout:g} s"
        )
        return _Running(
            plugin=plugin,
            proc=proc,
            relay=Relay(read_fd, log, None),
            pipe=read_fd,
            log=log,
            started=started,
            deadline=started + plugin.timeout,
        )

    def _env(self, plugin: Plugin, folder: Path, out: Path) -> dict[str, str]:
        settings = self.settings
        if plugin.as_model:
            env = agent_env(settings.environ, settings.model, settings.agent_socket)
            if not plugin.llm:
                for name in MODEL_ENV:
                    env.pop(name, None)
        else:
            env = service_env(settings.environ)
            # The operator's program, which may run the image's tools by name.
            env["PATH"] = image_path(settings.environ)
            env[contract.ENV_RESULTS] = str(settings.results_dir)
            env[contract.ENV_ARCHIVE] = str(settings.archive_dir)
            env["SSE_ADMIN_SOCKET"] = str(settings.admin_socket)
            env["SSE_PYTHON"] = settings.python
            if plugin.llm:
                for name in MODEL_ENV:
                    if name in settings.environ:
                        env[name] = settings.environ[name]
            else:
                for name in MODEL_ENV:
                    env.pop(name, None)
        env.update(
            SSE_PLUGIN_NAME=plugin.name,
            SSE_PLUGIN_HOOK=plugin.hook,
            SSE_PLUGIN_DIR=str(folder),
            SSE_PLUGIN_OUT=str(out),
            SSE_SOURCE=self.source,
        )
        return env

    def _end(self, running: _Running, why: str) -> None:
        """Kill what is left of the plugin's group, copy its last output, record it."""
        proc = running.proc
        still = proc.returncode is None
        signal_group(proc.pid, signal.SIGKILL)
        self.children.wait(proc, 5.0, self.wakeup)
        running.relay.drain(self.wakeup, 1.0)
        running.relay.finish()
        os.close(running.pipe)
        os.close(running.log)
        duration = round(time.monotonic() - running.started, 3)
        plugin = running.plugin
        code = proc.returncode
        if running.timed_out:
            outcome, reason = "timeout", f"killed at its timeout of {plugin.timeout:g} s"
        elif still and self.wakeup.stopping:
            outcome, reason = "error", "the run was stopped while it ran: killed"
        elif still and why:
            # Beside the agent or the evaluator: it ran until that phase ended.
            outcome, reason = "ok", f"{why}: killed"
        elif code == 0:
            outcome, reason = "ok", None
        else:
            outcome, reason = "failed", f"exit status {_status(code)}"
        self._record(plugin, outcome, reason, exit_code=_exit(code, still), duration=duration)
        self.say(f"plugin {plugin.name}: {outcome}" + (f" ({reason})" if reason else ""))

    def kill_model(self) -> None:
        """Kill every `model` process a model-hook plugin left behind."""
        model = self.settings.model
        if os.geteuid() != 0 or model.uid in (0, os.geteuid()):
            return
        try:
            kill_user(model, between=self.children.reap)
        except (RuntimeError, ValueError) as exc:
            self.say(f"cannot end every process of {model.name} after its plugins: {exc}")

    # -- the record ----------------------------------------------------------------

    def _skip(self, plugin: Plugin, reason: str) -> None:
        self._record(plugin, "skipped", reason, ran=False, log=False)
        self.say(f"plugin {plugin.name} skipped: {reason}")

    def _record(
        self,
        plugin: Plugin,
        outcome: str,
        reason: str | None,
        *,
        exit_code: int | None = None,
        duration: float | None = None,
        ran: bool = True,
        log: bool = True,
    ) -> None:
        """Note how `plugin` ended; `ran`: it was started (so it has its folder), `log`:
        its log was made."""
        base = f"{contract.RUN_ARCHIVE}/" if plugin.as_model else ""
        self.results[plugin.name] = {
            "name": plugin.name,
            "hook": plugin.hook,
            "user": self.settings.model.name if plugin.as_model else "root",
            "outcome": outcome,
            "reason": reason,
            "exit_code": exit_code,
            "duration": duration,
            "log": f"{contract.PLUGINS_RESULTS}/{plugin.name}.log" if log else None,
            "folder": f"{base}{contract.PLUGINS_RESULTS}/{plugin.name}" if ran else None,
        }

    def write(self, phase: str, owner: tuple[int, int]) -> None:
        """Write every plugin's outcome (`skipped` for those whose hook never came)."""
        if not self.plan:
            return
        for running in self.beside:
            self._end(running, f"the run ended in the {phase} phase")
        self.beside = []
        for plugin in self.plan:
            if plugin.name not in self.results:
                self._skip(plugin, f"the run ended in the {phase} phase, before it")
        text = json.dumps([self.results[plugin.name] for plugin in self.plan], indent=2)
        try:
            write_marker(self.settings.results_dir, contract.PLUGIN_RESULTS_FILE, text, *owner)
        except OSError as exc:
            self.say(f"cannot write {contract.PLUGIN_RESULTS_FILE}: {exc}")


def _status(returncode: int | None) -> str:
    if returncode is None:
        return "unknown"
    return f"{128 - returncode} (signal {-returncode})" if returncode < 0 else str(returncode)


def _exit(returncode: int | None, killed: bool) -> int | None:
    if returncode is None or killed:
        return None
    return 128 - returncode if returncode < 0 else returncode


def _read(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _restore(path: Path, data: bytes) -> None:
    """Put `path` back as `data`, replacing whatever is there now, never through a link."""
    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
