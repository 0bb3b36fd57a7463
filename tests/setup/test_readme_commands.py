"""After set-up, the README's commands work as printed: `uv` is on PATH, `uv run` runs ours."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HOME = Path(__file__).resolve().parents[2]
FRESH_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
"""A PATH without /usr/local/bin or any uv: a machine where set-up has not run."""


def real_uv() -> Path:
    found = shutil.which("uv") or Path.home() / ".local/share/ssebench/uv/bin/uv"
    if not Path(found).exists():
        pytest.fail("no uv on this machine: run ./scripts/setup.sh first")
    return Path(found)


@pytest.mark.process
def test_setup_puts_uv_on_path_and_the_readmes_uv_run_works_as_printed(tmp_path: Path) -> None:
    # ensure_uv finds uv where set-up installs it (SSEBENCH_TOOLS), none on PATH yet.
    tools = tmp_path / "tools"
    (tools / "uv" / "bin").mkdir(parents=True)
    (tools / "uv" / "bin" / "uv").symlink_to(real_uv())
    on_path = tmp_path / "local-bin"
    on_path.mkdir()
    env = {
        "HOME": str(Path.home()),
        "PATH": FRESH_PATH,
        "SSEBENCH_TOOLS": str(tools),
        "SSEBENCH_UV_LINK_DIR": str(on_path),
    }
    script = f"source {HOME / 'scripts' / 'lib.sh'} && ensure_uv && link_uv"
    linked = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert linked.returncode == 0, linked.stderr
    assert f"uv linked into {on_path}" in linked.stderr

    # A new shell of that machine: its PATH has the link folder, as /usr/local/bin is.
    shell = {**env, "PATH": f"{on_path}:{FRESH_PATH}"}
    listed = subprocess.run(
        ["uv", "run", "ssebench", "tasks", "list", "--json"],
        cwd=HOME,
        env=shell,
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert '"id": "tlvkit-heap-overflow"' in listed.stdout

    # Run again with uv on PATH: nothing more is linked.
    again = subprocess.run(
        ["bash", "-c", script], env=shell, capture_output=True, text=True, check=False
    )
    assert again.returncode == 0 and "linked" not in again.stderr


@pytest.mark.process
def test_every_uv_run_command_of_the_readme_names_a_command_of_the_workspace() -> None:
    readme = (HOME / "README.md").read_text()
    commands = re.findall(r"uv run ([a-z][\w.-]*)(?: -m ([\w.]+))?", readme)
    assert commands, "the README shows no `uv run` command"
    venv = HOME / ".venv" / "bin"
    for program, module in commands:
        assert (venv / program).exists() or program == "python", program
        if module:
            spec = subprocess.run(
                [
                    str(venv / "python"),
                    "-c",
                    f"import importlib.util as u; assert u.find_spec({module!r})",
                ],
                capture_output=True,
                check=False,
            )
            assert spec.returncode == 0, module


def test_setup_runs_link_uv_after_finding_uv() -> None:
    setup = (HOME / "scripts" / "setup.sh").read_text()
    assert "ensure_uv\nlink_uv\n" in setup
    assert os.access(HOME / "scripts" / "setup.sh", os.X_OK)
