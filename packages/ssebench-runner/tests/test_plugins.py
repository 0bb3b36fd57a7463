"""`--plugin` and plugins.yaml: which plugins a run runs, refusals, staging and recording."""

from __future__ import annotations

import contextlib
import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from ssebench.conformance.fake import FakeBackend, FakeContainer, FakeImage
from ssebench.runner._plugins import stage_plugins
from ssebench.spec import Backend, UserError, choose_plugins, contract, load_plugins

from .conftest import run_args, run_dir
from .fakes import fake_backend
from .test_validation import refused

Cli = Callable[..., Result]

PLUGINS_YAML = """\
plugins:
  - name: probe
    hook: before-agent
    enabled: true
    timeout: 30
  - name: critic
    hook: after-grading
    llm: true
  - name: lister
    hook: after-grading
"""


def write_plugins(home: Path, text: str = PLUGINS_YAML, *, names: tuple[str, ...] = ()) -> Path:
    """The home's plugins file and a folder with an executable run.sh for each name."""
    folder = home / "plugins"
    folder.mkdir(exist_ok=True)
    for name in names or ("probe", "critic", "lister"):
        (folder / name).mkdir()
        script = folder / name / "run.sh"
        script.write_text("#!/bin/sh\necho hello\n")
        script.chmod(0o755)
    (folder / "plugins.yaml").write_text(text)
    return folder / "plugins.yaml"


def seeing_backend(plugins_json: bytes | None = None) -> FakeBackend:
    """The fake whose container copies what it finds at the plugins mount into its results
    (`seen/...`) and, given one, leaves `plugins_json` as the entrypoint's record."""
    backend = fake_backend()
    agent = backend.built.program

    def program(container: FakeContainer) -> int:
        for name in (contract.PLUGINS_PLAN, "lister/run.sh", "critic/run.sh"):
            with contextlib.suppress(FileNotFoundError):
                data = container.read(f"{contract.PLUGINS_DIR}/{name}")
                container.write(f"{contract.RESULTS_DIR}/seen/{name.replace('/', '-')}", data)
        if plugins_json is not None:
            container.write(f"{contract.RESULTS_DIR}/{contract.PLUGIN_RESULTS_FILE}", plugins_json)
        return agent(container)

    backend.built = FakeImage(files=backend.built.files, program=program)
    return backend


def config_plugins() -> list[str]:
    summary = json.loads((run_dir() / "summary.json").read_text())
    return [plugin["name"] for plugin in summary["config"]["plugins"]]


def test_without_plugin_the_enabled_ones_run(home: Path, fake: FakeBackend, cli: Cli) -> None:
    write_plugins(home)
    outcome = cli(*run_args())
    assert outcome.exit_code == 0, outcome.stderr
    assert config_plugins() == ["probe"]


def test_plugin_selects_exactly_those_in_the_files_order(
    home: Path, fake: FakeBackend, cli: Cli
) -> None:
    write_plugins(home)
    outcome = cli(*run_args("--plugin", "lister", "--plugin", "critic"))
    assert outcome.exit_code == 0, outcome.stderr
    assert config_plugins() == ["critic", "lister"]


def test_the_chosen_plugins_are_staged_read_only_with_their_plan(
    home: Path, use_backend: Callable[[Backend[Any]], None], cli: Cli
) -> None:
    write_plugins(home)
    backend = seeing_backend()
    use_backend(backend)
    assert cli(*run_args("--plugin", "lister")).exit_code == 0
    (spec,) = backend.calls_to("start")
    (mount,) = [m for m in spec[0].artifacts if m.target == contract.PLUGINS_DIR]
    assert mount.read_only
    # Only the chosen plugin's folder, and the plan.
    seen = run_dir() / "seen"
    assert sorted(p.name for p in seen.iterdir()) == ["lister-run.sh", contract.PLUGINS_PLAN]
    assert json.loads((seen / contract.PLUGINS_PLAN).read_text()) == [
        {"name": "lister", "hook": "after-grading", "enabled": False, "llm": False, "timeout": 300}
    ]
    assert not Path(mount.source).exists()  # the private copy is gone after the run


def test_a_run_without_plugins_mounts_none(
    home: Path, use_backend: Callable[[Backend[Any]], None], cli: Cli
) -> None:
    write_plugins(home, "plugins:\n  - name: lister\n    hook: after-grading\n", names=("lister",))
    backend = seeing_backend()
    use_backend(backend)
    assert cli(*run_args()).exit_code == 0
    (spec,) = backend.calls_to("start")
    assert [m.target for m in spec[0].artifacts] == []


def test_each_plugin_without_a_recorded_outcome_is_an_error(
    home: Path, fake: FakeBackend, cli: Cli
) -> None:
    # The fake container writes no plugins.json: the run says nothing of its plugins.
    write_plugins(home)
    cli(*run_args("--plugin", "probe"))
    summary = json.loads((run_dir() / "summary.json").read_text())
    (result,) = summary["plugin_results"]
    assert result["name"] == "probe" and result["user"] == "model"
    assert result["outcome"] == "error"
    assert "without recording" in result["reason"]
    assert summary["patch_result"]["status"] == "passed"  # a plugin never changes the grade


def test_a_recorded_outcome_is_kept_in_the_summary(
    home: Path, use_backend: Callable[[Backend[Any]], None], cli: Cli
) -> None:
    write_plugins(home)
    record = json.dumps(
        [
            {
                "name": "lister",
                "hook": "after-grading",
                "user": "root",
                "outcome": "timeout",
                "reason": "killed at its timeout of 300 s",
                "duration": 300.2,
                "log": "plugins/lister.log",
                "folder": "plugins/lister",
            }
        ]
    ).encode()
    use_backend(seeing_backend(record))
    cli(*run_args("--plugin", "lister"))
    (result,) = json.loads((run_dir() / "summary.json").read_text())["plugin_results"]
    assert result["outcome"] == "timeout" and result["duration"] == 300.2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--plugin", "nosuch"],
            "unknown plugin 'nosuch': {file} declares critic, lister, probe",
            id="unknown",
        ),
        pytest.param(
            ["--plugin", "probe", "--prebuilt"],
            "--plugin cannot be used with --prebuilt: a published image runs as it was built; "
            "drop one of them",
            id="prebuilt",
        ),
        pytest.param(
            ["--plugin", "probe", "--mode", "sidecar"],
            "--plugin runs in sandbox mode only, not sidecar: use --mode sandbox",
            id="sidecar",
        ),
    ],
)
def test_a_bad_plugin_choice_is_refused_in_one_line_and_nothing_is_created(
    home: Path, fake: FakeBackend, cli: Cli, args: list[str], message: str
) -> None:
    path = write_plugins(home)
    assert refused(cli(*run_args(*args)), fake) == message.format(file=path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "plugins:\n  - name: probe\n    hook: before-agent\n    colour: red\n",
            "unknown key 'plugins[0].colour'",
            id="unknown key",
        ),
        pytest.param(
            "plugins:\n  - name: probe\n    hook: during-lunch\n",
            "during-lunch",
            id="unknown hook",
        ),
        pytest.param(
            "plugins:\n  - name: probe\n    hook: before-agent\n    timeout: 0\n",
            "timeout must be a positive number of seconds",
            id="zero timeout",
        ),
        pytest.param(
            "plugins:\n  - name: Probe_1\n    hook: before-agent\n",
            "invalid plugin name 'Probe_1'",
            id="bad name",
        ),
        pytest.param(
            "plugins:\n  - name: probe\n    hook: before-agent\n"
            "  - name: probe\n    hook: after-agent\n",
            "plugin 'probe' is declared twice",
            id="twice",
        ),
    ],
)
def test_a_plugins_file_that_fails_its_schema_is_refused(
    home: Path, fake: FakeBackend, cli: Cli, text: str, message: str
) -> None:
    write_plugins(home, text, names=("probe",))
    assert message in refused(cli(*run_args()), fake)


def test_a_plugin_without_an_executable_run_sh_is_refused(
    home: Path, fake: FakeBackend, cli: Cli
) -> None:
    path = write_plugins(home)
    (path.parent / "lister" / "run.sh").chmod(0o644)
    message = refused(cli(*run_args("--plugin", "lister")), fake)
    assert message.startswith(f"{path}: plugin 'lister' needs an executable ")


def test_the_plugins_file_comes_from_the_environment(
    home: Path, fake: FakeBackend, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    path = write_plugins(other, "plugins:\n  - name: probe\n    hook: on-agent\n", names=("probe",))
    monkeypatch.setenv("SSEBENCH_PLUGINS", str(path))
    assert cli(*run_args("--plugin", "probe")).exit_code == 0
    assert config_plugins() == ["probe"]


@pytest.mark.parametrize("option", [("--mode", "sidecar"), ("--prebuilt",)])
def test_enabled_plugins_are_left_out_of_sidecar_and_prebuilt_runs(
    option: tuple[str, ...], home: Path, fake: FakeBackend, cli: Cli
) -> None:
    write_plugins(home)
    outcome = cli(*run_args(*option))
    assert outcome.exit_code == 0, outcome.stderr
    assert config_plugins() == []
    assert fake.calls_to("start")[0][0].artifacts == []  # no plugins folder mounted


def test_a_run_without_a_plugins_file_has_no_plugins(
    home: Path, fake: FakeBackend, cli: Cli
) -> None:
    assert not (home / "plugins").exists()
    assert cli(*run_args()).exit_code == 0
    assert config_plugins() == []
    assert json.loads((run_dir() / "summary.json").read_text())["plugin_results"] == []


def test_a_plugin_folder_holding_a_link_is_refused_before_anything_is_made(
    home: Path, fake: FakeBackend, cli: Cli, tmp_path: Path
) -> None:
    path = write_plugins(home)
    secret = tmp_path / "operator-key"
    secret.write_text("do not copy\n")
    link = path.parent / "lister" / "conf" / "key"
    link.parent.mkdir()
    link.symlink_to(secret)

    message = refused(cli(*run_args("--plugin", "lister")), fake)

    assert message == (
        f"plugin 'lister': {link} is a link, and plugins are copied into a run without "
        "links: put the file itself there"
    )


def test_staging_keeps_each_files_mode_and_copies_no_link(home: Path, tmp_path: Path) -> None:
    path = write_plugins(home)
    lister = path.parent / "lister"
    (lister / "run.sh").chmod(0o750)
    (lister / "token").write_text("root's only\n")
    (lister / "token").chmod(0o600)
    (lister / "private").mkdir(mode=0o700)
    (lister / "private" / "notes").write_text("n\n")
    (lister / "private" / "notes").chmod(0o640)
    plugins = choose_plugins(load_plugins(path), ["lister"], path)

    staged = stage_plugins(plugins, path.parent, tmp_path / "staged")

    modes = {
        str(item.relative_to(staged)): stat.S_IMODE(item.lstat().st_mode)
        for item in staged.rglob("*")
    }
    assert modes == {
        contract.PLUGINS_PLAN: 0o644,
        "lister": stat.S_IMODE(lister.stat().st_mode),
        "lister/run.sh": 0o750,
        "lister/token": 0o600,
        "lister/private": 0o700,
        "lister/private/notes": 0o640,
    }
    (lister / "later").symlink_to("/etc/hostname")  # made after the plan was checked
    with pytest.raises(UserError, match="is a link"):
        stage_plugins(plugins, path.parent, tmp_path / "again")
