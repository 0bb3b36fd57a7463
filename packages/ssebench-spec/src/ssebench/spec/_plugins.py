"""Plugins: `plugins.yaml`, what a run records of each plugin, and where they live.

A plugin is a folder holding an executable `run.sh`, next to the `plugins.yaml`
that declares it (the home's `plugins/plugins.yaml`, or the file
`SSEBENCH_PLUGINS` names). The runner stages the chosen folders into the run's
container, where the entrypoint runs each at its hook:

| hook | when | as |
|---|---|---|
| `before-agent` | before the agent starts | `model` |
| `on-agent` | beside the agent, until the agent phase ends | `model` |
| `after-agent` | after the agent, before the agent phase ends | `model` |
| `before-grading` | after the agent phase, before the evaluator | root |
| `on-grading` | beside the evaluator, until it ends | root |
| `after-grading` | after the grade is written, before the hand-over | root |

Plugins of one hook run one after another, in the file's order (those beside
the agent or the evaluator all at once). A plugin's outcome never changes the
run's grade or its exit status.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final, Literal, get_args

import msgspec

from ssebench.spec import contract, settings
from ssebench.spec._base import Message, UserInput
from ssebench.spec._codec import load_yaml_file
from ssebench.spec._errors import UserError

Hook = Literal[
    "before-agent", "on-agent", "after-agent", "before-grading", "on-grading", "after-grading"
]
"""When a plugin runs (the module docstring's table)."""

HOOKS: Final[tuple[Hook, ...]] = get_args(Hook)
"""Every hook, in the order a run reaches them."""

MODEL_HOOKS: Final[frozenset[Hook]] = frozenset({"before-agent", "on-agent", "after-agent"})
"""Hooks whose plugins run as `model`, bound by every integrity rule that binds the agent."""

PluginOutcome = Literal["ok", "skipped", "failed", "timeout", "error"]
"""How a plugin ended: exit 0; not run (with the reason); a non-zero exit; killed at its
timeout; it could not be run, or the run ended without saying."""

PLUGINS_ENV: Final = settings.PLUGINS.name
"""Environment variable naming the plugins file to use instead of the home's."""

PLUGINS_FILE: Final = "plugins/plugins.yaml"
"""The home's plugins file, relative to the home; its folder holds the plugin folders."""

PLUGIN_SCRIPT: Final = contract.PLUGIN_SCRIPT
"""The executable every plugin folder holds."""

PLUGIN_NAME: Final = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
"""What a plugin's name may look like: it names its folder and its results folder."""

DEFAULT_PLUGIN_TIMEOUT: Final = 300
"""Seconds a plugin may run when plugins.yaml does not say."""


class PluginConfig(UserInput, kw_only=True, frozen=True):
    """One entry of plugins.yaml; also what `config.plugins` records of a chosen plugin."""

    name: str
    hook: Hook
    enabled: bool = False
    """Whether runs without `--plugin` run it."""
    llm: bool = False
    """Whether it gets the run's model key (`SSE_API_KEY`, `SSE_BASE_URL`, `SSE_MODEL_NAME`)."""
    timeout: int = DEFAULT_PLUGIN_TIMEOUT
    """Seconds; then it is killed with its process group."""

    def __post_init__(self) -> None:
        if PLUGIN_NAME.fullmatch(self.name) is None or len(self.name) > 64:
            raise ValueError(
                f"invalid plugin name {self.name!r}: use 1-64 lower-case letters, digits "
                "and single '-' between them"
            )
        if self.timeout <= 0:
            raise ValueError(f"plugin {self.name!r}: timeout must be a positive number of seconds")


class PluginsFile(UserInput, kw_only=True, frozen=True):
    """`plugins.yaml`: the plugins a run may choose, in the order they run."""

    plugins: list[PluginConfig] = msgspec.field(default_factory=list)


class PluginResult(Message, kw_only=True, frozen=True):
    """How one plugin of a run ended (`summary.json` `plugin_results`)."""

    name: str
    hook: Hook
    user: str
    """Who it ran as: `model` or `root`."""
    outcome: PluginOutcome
    reason: str | None = None
    """Why it was skipped, failed or could not run."""
    exit_code: int | None = None
    duration: float | None = None
    """Seconds it ran."""
    log: str | None = None
    """Its log, relative to the run directory."""
    folder: str | None = None
    """Its results folder, relative to the run directory."""


def plugins_path(home: Path) -> Path:
    """The plugins file in force: `SSEBENCH_PLUGINS`, else `<home>/plugins/plugins.yaml`."""
    explicit = os.environ.get(PLUGINS_ENV)
    return Path(explicit) if explicit else home / PLUGINS_FILE


def load_plugins(path: Path) -> PluginsFile:
    """Read a plugins file and check its folders; a missing file declares no plugins.

    Raises:
        TaskConfigError: the file is not valid YAML or does not match `PluginsFile`
            (an unknown key, a bad name or hook).
        UserError: two plugins share a name, or a plugin's folder has no executable
            `run.sh`.
    """
    if not path.exists():
        return PluginsFile()
    found = load_yaml_file(path, PluginsFile)
    seen: set[str] = set()
    for plugin in found.plugins:
        if plugin.name in seen:
            raise UserError(f"{path}: plugin {plugin.name!r} is declared twice")
        seen.add(plugin.name)
        script = path.parent / plugin.name / PLUGIN_SCRIPT
        if not (script.is_file() and os.access(script, os.X_OK)):
            raise UserError(
                f"{path}: plugin {plugin.name!r} needs an executable {script}: "
                "a plugin is a folder named after it, next to the file, holding run.sh"
            )
    return found


def choose_plugins(found: PluginsFile, names: list[str], where: Path) -> list[PluginConfig]:
    """The plugins a run runs: exactly `names` when given (in the file's order), else the
    enabled ones.

    Raises:
        UserError: a name is not in the file; the message lists those that are.
    """
    if not names:
        return [plugin for plugin in found.plugins if plugin.enabled]
    known = {plugin.name for plugin in found.plugins}
    unknown = [name for name in names if name not in known]
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise UserError(f"unknown plugin {unknown[0]!r}: {where} declares {listed}")
    return [plugin for plugin in found.plugins if plugin.name in names]
