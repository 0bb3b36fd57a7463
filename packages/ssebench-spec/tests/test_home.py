from __future__ import annotations

from pathlib import Path

import pytest

from ssebench.spec import (
    TaskConfigError,
    UserError,
    find_agent,
    find_home,
    find_task,
    list_agents,
    load_dataset,
)

CONFIG = """\
id: {id}
project: p
repository: r
language: python
source: /src/p
task_description: {{issue: broken}}
scripts: {{build: scripts/build.sh}}
files: {{patch: diffs/patch.diff}}
"""


def make_home(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[tool.ssebench]\nhome = true\n")
    return root


def make_agent(parent: Path, name: str, version: str = "1") -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(f"name: {name}\nversion: '{version}'\nuses_model: false\n")
    return folder


def make_task(dataset: Path, task_id: str) -> Path:
    folder = dataset / task_id / "sse"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(CONFIG.format(id=task_id))
    return folder.parent


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSEBENCH_HOME", raising=False)
    monkeypatch.delenv("SSEBENCH_AGENT_PATH", raising=False)


def test_the_home_is_the_nearest_parent_marked_in_pyproject(tmp_path: Path) -> None:
    home = make_home(tmp_path / "checkout")
    deep = home / "a" / "b"
    deep.mkdir(parents=True)
    (home / "a" / "pyproject.toml").write_text("[project]\nname = 'other'\n")
    assert find_home(deep) == home


def test_ssebench_home_wins_over_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path / "elsewhere")
    monkeypatch.setenv("SSEBENCH_HOME", str(home))
    assert find_home(make_home(tmp_path / "here")) == home


def test_ssebench_home_must_name_a_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSEBENCH_HOME", str(tmp_path))
    with pytest.raises(UserError, match=r"is not an SSEBench home: .*\[tool.ssebench\]"):
        find_home()


def test_without_a_marked_parent_the_checkout_this_package_lives_in_is_the_home(
    tmp_path: Path,
) -> None:
    home = find_home(tmp_path)
    assert (home / "packages" / "ssebench-spec").is_dir()


def test_agents_come_from_the_home_then_the_agent_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path / "home")
    make_agent(home / "agents", "dummy")
    extra = tmp_path / "extra"
    make_agent(extra, "probe")
    make_agent(extra, "dummy", version="shadowed")
    monkeypatch.setenv("SSEBENCH_AGENT_PATH", str(extra))
    assert [agent.name for agent in list_agents(home)] == ["dummy", "probe"]
    assert find_agent(home, "dummy").version == "1"
    assert find_agent(home, "probe").folder == str(extra / "probe")


def test_an_unknown_agent_lists_the_known_ones(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    make_agent(home / "agents", "dummy")
    with pytest.raises(UserError, match=r"unknown agent 'nope': known agents are dummy"):
        find_agent(home, "nope")


def test_an_agent_whose_name_differs_from_its_folder_is_refused(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    folder = make_agent(home / "agents", "dummy")
    (folder / "agent.yaml").write_text("name: other\nversion: '1'\nuses_model: false\n")
    with pytest.raises(TaskConfigError, match="key 'name' is 'other' but the folder is 'dummy'"):
        find_agent(home, "dummy")


PACKAGES = "packages:\n  pypi: [{pypi}]\n  npm: [{npm}]\n"


def test_an_agent_names_the_registry_packages_it_installs_pinned(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    folder = make_agent(home / "agents", "real")
    with (folder / "agent.yaml").open("a") as out:
        out.write(
            PACKAGES.format(pypi="'mini-swe-agent[x]==2.4.1'", npm="'@s/p@1.0.0', 'o@1.18.2'")
        )
    packages = find_agent(home, "real").packages
    assert packages.pypi == ["mini-swe-agent[x]==2.4.1"]
    assert packages.npm == ["@s/p@1.0.0", "o@1.18.2"]


@pytest.mark.parametrize(
    ("pypi", "npm", "message"),
    [
        (
            "'mini-swe-agent>=2'",
            "",
            r"pypi: 'mini-swe-agent>=2' is not pinned: write name==version",
        ),
        ("'mini-swe-agent'", "", r"pypi: 'mini-swe-agent' is not pinned"),
        ("", "'opencode-ai@^1.18'", r"npm: 'opencode-ai@\^1.18' is not pinned: write name@version"),
        ("", "'opencode-ai@latest'", r"npm: 'opencode-ai@latest' is not pinned"),
        ("", "'git+https://x/y'", r"npm: 'git\+https://x/y' is not pinned"),
    ],
)
def test_an_unpinned_package_is_refused_with_the_form_allowed(
    tmp_path: Path, pypi: str, npm: str, message: str
) -> None:
    home = make_home(tmp_path / "home")
    folder = make_agent(home / "agents", "real")
    with (folder / "agent.yaml").open("a") as out:
        out.write(PACKAGES.format(pypi=pypi, npm=npm))
    with pytest.raises(TaskConfigError, match=message):
        find_agent(home, "real")


def test_a_dataset_lists_its_tasks_with_its_version(tmp_path: Path) -> None:
    dataset = tmp_path / "demo"
    make_task(dataset, "b-task")
    make_task(dataset, "a-task")
    (dataset / "notes").mkdir()
    (dataset / "dataset.yaml").write_text("version: '7'\n")
    tasks = load_dataset(dataset)
    assert [task.id for task in tasks] == ["a-task", "b-task"]
    assert {task.dataset_version for task in tasks} == {"7"}
    assert find_task(dataset, "b-task").config.id == "b-task"


def test_an_unknown_task_lists_the_tasks_there_are(tmp_path: Path) -> None:
    dataset = tmp_path / "demo"
    make_task(dataset, "a-task")
    (dataset / "dataset.yaml").write_text("version: '1'\n")
    with pytest.raises(UserError, match=r"unknown task 'zzz' in .*: tasks there are a-task"):
        find_task(dataset, "zzz")


def test_task_ids_that_differ_only_in_case_are_refused(tmp_path: Path) -> None:
    dataset = tmp_path / "demo"
    make_task(dataset, "Task-A")
    make_task(dataset, "task-a")
    (dataset / "dataset.yaml").write_text("version: '1'\n")
    with pytest.raises(UserError, match="differ only in case"):
        load_dataset(dataset)


def test_a_dataset_without_its_yaml_is_refused(tmp_path: Path) -> None:
    (tmp_path / "demo").mkdir()
    with pytest.raises(TaskConfigError, match=r"dataset.yaml: cannot read"):
        load_dataset(tmp_path / "demo")


def test_finding_one_task_ignores_a_broken_neighbour(tmp_path: Path) -> None:
    dataset = tmp_path / "demo"
    make_task(dataset, "good")
    (make_task(dataset, "broken") / "sse" / "config.yaml").write_text("colour: blue\n")
    (dataset / "dataset.yaml").write_text("version: '1'\n")
    assert find_task(dataset, "good").id == "good"
    with pytest.raises(TaskConfigError, match="unknown key 'colour'"):
        find_task(dataset, "broken")


def test_a_task_whose_id_differs_from_its_folder_is_refused(tmp_path: Path) -> None:
    dataset = tmp_path / "demo"
    (make_task(dataset, "folder-name") / "sse" / "config.yaml").write_text(
        CONFIG.format(id="other-name")
    )
    (dataset / "dataset.yaml").write_text("version: '1'\n")
    expected = "key 'id' is 'other-name' but the task folder is 'folder-name'; they must be"
    with pytest.raises(TaskConfigError, match=expected):
        find_task(dataset, "folder-name")
    with pytest.raises(TaskConfigError, match=expected):
        load_dataset(dataset)
