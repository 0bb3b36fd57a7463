"""A run's plugins on the host: which ones run (`--plugin`, plugins.yaml), and staging them.

How plugins reach the container: the runner copies the chosen plugin folders
and a plan (`contract.PLUGINS_PLAN`: name, hook, llm, timeout of each) into a
private folder of its own, made readable for the container's users, and mounts
it read-only at `contract.PLUGINS_DIR`, as it mounts the reference patch for the
reference agent. Nothing is built into an image, so a run's plugins never
change its images or their cached layers, and the folder holds nothing hidden:
the task's material stays in root's `/ssebench`, out of reach of the plugins
that run as `model`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import msgspec

from ssebench.spec import PluginConfig, UserError, choose_plugins, contract, load_plugins
from ssebench.spec import plugins_path as _plugins_path


def run_plugins(
    names: tuple[str, ...], *, mode: str, prebuilt: bool, home: Path
) -> tuple[list[PluginConfig], Path | None]:
    """The plugins a run runs and the folder holding their folders, checked.

    `--plugin NAME` selects exactly those; without it the plugins that
    plugins.yaml enables run. Plugins run in sandbox mode only and never with
    `--prebuilt` (a published image runs as it was built): `--plugin` there is
    refused, and the enabled ones are left out.

    Args:
        names: the `--plugin` values, in the order given.
        mode: the run's checked mode.
        prebuilt: whether the run uses published images.
        home: the SSEBench home (its plugins file, unless `SSEBENCH_PLUGINS` names one).

    Returns:
        The chosen plugins in the file's order, and the plugins file's folder (None
        when none is chosen).

    Raises:
        UserError: `--plugin` with `--prebuilt` or outside sandbox mode, an unknown
            name, or a plugins file that fails its schema.
    """
    if names and prebuilt:
        raise UserError(
            "--plugin cannot be used with --prebuilt: a published image runs as it was "
            "built; drop one of them"
        )
    if names and mode != "sandbox":
        raise UserError(f"--plugin runs in sandbox mode only, not {mode}: use --mode sandbox")
    if prebuilt or mode != "sandbox":
        return [], None
    path = _plugins_path(home)
    chosen = choose_plugins(load_plugins(path), list(names), path)
    for plugin in chosen:
        _refuse_links(path.parent / plugin.name, plugin.name)
    return chosen, (path.parent if chosen else None)


def _refuse_links(folder: Path, name: str) -> None:
    """Raises:
    UserError: the plugin's folder holds a link (plugins are copied without links: one
        could name any file of the host, a key say, and put it in the run).
    """
    for parent, folders, files in os.walk(folder):
        for entry in (*folders, *files):
            path = Path(parent, entry)
            if path.is_symlink():
                raise UserError(
                    f"plugin {name!r}: {path} is a link, and plugins are copied into a run "
                    "without links: put the file itself there"
                )


def stage_plugins(plugins: list[PluginConfig], source: Path, dest: Path) -> Path:
    """Copy the chosen plugin folders and their plan into `dest`: no link (refused), every
    file and folder with its own mode, so what its author kept from others stays so.

    Args:
        plugins: the run's plugins.
        source: the folder holding the plugin folders (the plugins file's).
        dest: a new folder inside a private one of the runner's.

    Returns:
        `dest`, to mount read-only at `contract.PLUGINS_DIR`.

    Raises:
        UserError: a plugin's folder holds a link.
        OSError: a folder cannot be copied.
    """
    dest.mkdir(mode=0o755)
    for plugin in plugins:
        # symlinks=True: a link made since `run_plugins` checked is copied as a link, never
        # followed, and the copy is what is checked.
        shutil.copytree(source / plugin.name, dest / plugin.name, symlinks=True)
        _refuse_links(dest / plugin.name, plugin.name)
    (dest / contract.PLUGINS_PLAN).write_bytes(msgspec.json.encode(plugins))
    (dest / contract.PLUGINS_PLAN).chmod(0o644)
    dest.chmod(0o755)
    return dest
