"""The plugins' suite: real `ssebench run`s whose plugins come from a plugins file of the test's.

`PluginRuns.run` starts `ssebench run --plugin ...` with `SSEBENCH_PLUGINS` naming a
plugins file the test wrote (`write_plugins`), waits for it, and returns the run
directory with the CLI's exit status. The shipped plugins (`artifact`, `review`)
are copied in beside the test's own, so one file offers them all.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOME = Path(__file__).resolve().parents[2]
SHIPPED = HOME / "plugins"
DEMO = HOME / "datasets" / "demo"
CLI_TIMEOUT = 1200


def ssebench() -> str:
    """The installed `ssebench` command of this environment."""
    script = Path(sys.executable).with_name("ssebench")
    return str(script if script.exists() else shutil.which("ssebench") or "ssebench")


def write_plugins(folder: Path, entries: list[dict[str, Any]], scripts: dict[str, str]) -> Path:
    """A plugins file in `folder`: the shipped plugins' folders and `entries` with their
    `run.sh` (`scripts[name]`); the shipped entries are added as plugins.yaml declares them.

    Returns:
        The plugins file's path.
    """
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    shipped = yaml.safe_load((SHIPPED / "plugins.yaml").read_text())["plugins"]
    for entry in shipped:
        shutil.copytree(SHIPPED / entry["name"], folder / entry["name"], dirs_exist_ok=True)
    for name, text in scripts.items():
        (folder / name).mkdir(exist_ok=True)
        script = folder / name / "run.sh"
        script.write_text(text)
        script.chmod(0o755)
    path = folder / "plugins.yaml"
    # The shipped ones last: `artifact` then lists what the test's plugins of its hook wrote.
    path.write_text(yaml.safe_dump({"plugins": [*entries, *shipped]}, sort_keys=False))
    return path


@dataclass(frozen=True)
class Ran:
    """A finished `ssebench run`."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / "summary.json").read_text())
        return data

    def plugin(self, name: str) -> dict[str, Any]:
        """The plugin's entry of `plugin_results`."""
        found = [r for r in self.summary()["plugin_results"] if r["name"] == name]
        assert len(found) == 1, self.why()
        result: dict[str, Any] = found[0]
        return result

    def why(self) -> str:
        entry = self.run_dir / "entrypoint.log"
        log = entry.read_text(errors="replace")[-4000:] if entry.is_file() else ""
        return (
            f"exit {self.returncode}\n--- entrypoint.log ---\n{log}\n--- stderr ---\n"
            + (self.stderr[-3000:])
        )


def run(
    workdir: Path,
    plugins_file: Path,
    *,
    task: str,
    agent: str,
    plugins: list[str],
    extra: tuple[str, ...] = (),
    model: str = "none",
) -> Ran:
    """`ssebench run` of `agent` on `task` with exactly `plugins`, recorded under `workdir`."""
    run_id = f"plug-{agent}-{secrets.token_hex(3)}"
    argv = [ssebench(), "run", "--task", task, "--agent", agent, "--run-id", run_id, "--json"]
    for name in plugins:
        argv += ["--plugin", name]
    if model != "none":
        argv += ["--model", model]
    done = subprocess.run(
        [*argv, *extra],
        cwd=workdir,
        env={**os.environ, "SSEBENCH_PLUGINS": str(plugins_file), "SSEBENCH_HOME": str(HOME)},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        check=False,
    )
    run_dir = workdir / "results" / task / model / agent / run_id
    return Ran(done.returncode, done.stdout, done.stderr, run_dir)


def reference_lines(task: str) -> list[str]:
    """Distinctive lines the task's reference patch adds (how a leak of it is recognised)."""
    patch = (DEMO / task / "sse" / "diffs" / "patch.diff").read_text()
    return [
        line[1:].strip()
        for line in patch.splitlines()
        if line.startswith("+") and not line.startswith("+++") and len(line.strip()) >= 16
    ]
