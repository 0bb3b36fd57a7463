"""The tool layer locks a case image down as the container contract says (DESIGN.md §4).

Every check runs on the demo tasks' tool layers and on two synthetic case images
(tests/images/dataset): one holding nothing but a static busybox (no shell, git,
Python or /tmp; accounts written by hand), and a Debian image whose uid 1000 is
another user with groups, a sudo rule, a toolchain and a setuid script.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import docker
import pytest

from ssebench.spec import TaskConfig, default_dataset, find_home, find_task, load_dataset

from .conftest import DATASET, RUNTIME_PYTHON, Run, StatPaths

DEMO = default_dataset(find_home())
BUSYBOX = "ssebench-test-busybox-only"
UID1000 = "ssebench-test-debian-uid1000"
LAYERS = [(task.id, DEMO) for task in load_dataset(DEMO)] + [(BUSYBOX, DATASET), (UID1000, DATASET)]

# Every path under the roots given, with its owner, group, mode and kind, as JSON.
TREE_PROBE = r"""
import grp, json, os, pwd, stat, sys

def name(lookup, number):
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)

found = {}
for top in sys.argv[1:]:
    for folder, dirs, files in os.walk(top):
        for path in [folder] + [os.path.join(folder, f) for f in files + dirs]:
            info = os.lstat(path)
            found[path] = {
                "user": name(pwd.getpwuid, info.st_uid),
                "group": name(grp.getgrgid, info.st_gid),
                "mode": stat.S_IMODE(info.st_mode),
                "kind": "link" if stat.S_ISLNK(info.st_mode)
                else "dir" if stat.S_ISDIR(info.st_mode) else "file",
            }
print(json.dumps(found))
"""

# What the user running it can read of each path given ("yes"/"no").
READ_PROBE = r"""
import json, os, sys
result = {}
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").close()
        result[path] = "yes"
    except OSError:
        result[path] = "no"
print(json.dumps(result))
"""

ACCOUNTS_PROBE = r"""
import grp, json, pwd
print(json.dumps({
    "users": [list(p)[:7] for p in pwd.getpwall()],
    "groups": [[g.gr_name, g.gr_gid, g.gr_mem] for g in grp.getgrall()],
}))
"""


@dataclass(frozen=True)
class Layer:
    """A built tool layer and the config of its task."""

    task_id: str
    image: str
    config: TaskConfig

    @property
    def busybox(self) -> bool:
        return self.task_id == BUSYBOX

    def tool(self, *argv: str) -> list[str]:
        """A command line for one of the image's own tools (busybox's applet there)."""
        return ["/bin/busybox", *argv] if self.busybox else list(argv)

    def hidden(self) -> list[str]:
        files = self.config.files
        named = ["config.yaml", files.patch, files.future_test, *files.poc]
        named += self.config.task_description.crash_report
        return [f"/ssebench/{path}" for path in named if path]

    def scripts(self) -> list[str]:
        scripts = self.config.scripts
        return [f"/ssebench/{path}" for path in (scripts.build, scripts.run, scripts.test) if path]


@pytest.fixture(scope="module", params=LAYERS, ids=[task_id for task_id, _ in LAYERS])
def layer(request: pytest.FixtureRequest, tool_image: Any) -> Layer:
    task_id, dataset = request.param
    return Layer(task_id, tool_image(task_id, dataset), find_task(dataset, task_id).config)


def tree(run: Run, image: str, *tops: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = json.loads(
        run(image, [RUNTIME_PYTHON, "-I", "-c", TREE_PROBE, *tops]).ok()
    )
    return found


def readable(run: Run, image: str, user: str, paths: Sequence[str]) -> dict[str, str]:
    result: dict[str, str] = json.loads(
        run(image, [RUNTIME_PYTHON, "-I", "-c", READ_PROBE, *paths], user=user).ok()
    )
    return result


def owner(facts: dict[str, Any]) -> tuple[str, str, str]:
    return facts["user"], facts["group"], facts["mode"]


@pytest.mark.docker
def test_every_path_of_the_contract_has_its_owner_and_mode(
    layer: Layer, stat_paths: StatPaths
) -> None:
    expected = {
        "/ssebench": ("root", "root", "0o700"),
        "/ssebench/scripts": ("root", "root", "0o700"),
        "/ssebench-repo": ("root", "root", "0o700"),
        "/opt/ssebench": ("root", "root", "0o755"),
        "/var/lib/ssebench": ("root", "root", "0o700"),
        "/var/lib/ssebench/results": ("root", "root", "0o700"),
        "/tmp/sse-archive": ("model", "model", "0o700"),
        "/var/lib/ssebench-runner": ("root", "sse-runner", "0o710"),
        "/run/ssebench": ("root", "root", "0o700"),
        "/tmp": ("root", "root", "0o1777"),
    }
    expected |= {path: ("root", "root", "0o600") for path in layer.hidden()}
    # Every task's scripts are executable in its dataset: root's programs now.
    expected |= {path: ("root", "root", "0o700") for path in layer.scripts()}
    facts = stat_paths(layer.image, [*expected, layer.config.source])
    assert {path: owner(facts[path]) for path in expected} == expected
    assert facts[layer.config.source]["user"] == "model"
    assert facts[layer.config.source]["group"] == "model"


@pytest.mark.docker
def test_under_ssebench_everything_is_roots_alone(layer: Layer, run: Run) -> None:
    found = tree(run, layer.image, "/ssebench")
    assert len(found) > 5
    for path, facts in found.items():
        assert (facts["user"], facts["group"]) == ("root", "root"), path
        if facts["kind"] == "dir":
            assert facts["mode"] == 0o700, path
        elif facts["kind"] == "file":
            assert facts["mode"] in (0o600, 0o700), f"{path} is open to more than root"
    pocs = {path for path in found if path.startswith("/ssebench/pocs/")}
    assert pocs and all(found[path]["mode"] == 0o600 for path in pocs)


@pytest.mark.docker
def test_neither_the_agent_nor_sse_runner_can_read_anything_of_the_task_folder(
    layer: Layer, run: Run
) -> None:
    found = tree(run, layer.image, "/ssebench")
    paths = ["/ssebench", *layer.hidden(), *layer.scripts(), *sorted(set(found) - {"/ssebench"})]
    for user in ("model", "sse-runner"):
        answers = readable(run, layer.image, user, [*paths, "/ssebench-repo", "/etc/passwd"])
        assert answers.pop("/etc/passwd") == "yes", "the probe reads what everyone may"
        assert set(answers.values()) == {"no"}, (user, answers)


@pytest.mark.docker
def test_the_source_is_models_and_the_graded_copy_roots_with_the_same_files(
    layer: Layer, run: Run
) -> None:
    source = layer.config.source
    mine = tree(run, layer.image, source)
    graded = tree(run, layer.image, "/ssebench-repo")
    for path, facts in mine.items():
        assert (facts["user"], facts["group"]) == ("model", "model"), path
        assert facts["mode"] & 0o6002 == 0, f"{path}: setuid, setgid or world-writable"
    for path, facts in graded.items():
        assert (facts["user"], facts["group"]) == ("root", "root"), path
        assert facts["mode"] & 0o6002 == 0, f"{path}: setuid, setgid or world-writable"

    def files(found: dict[str, Any], top: str) -> set[str]:
        relative = {path[len(top) :] for path in found if found[path]["kind"] != "dir"}
        return {path for path in relative if "/.git/" not in path + "/"}

    assert files(mine, source) == files(graded, "/ssebench-repo")
    assert files(mine, source), "the project is not empty"


@pytest.mark.docker
def test_the_opt_ssebench_runtime_is_roots_and_read_only_to_everyone_else(
    layer: Layer, run: Run
) -> None:
    found = tree(run, layer.image, "/opt/ssebench")
    assert len(found) > 1000
    for path, facts in found.items():
        assert (facts["user"], facts["group"]) == ("root", "root"), path
        if facts["kind"] != "link":
            assert facts["mode"] & 0o022 == 0, f"{path} is writable by others"


@pytest.mark.docker
def test_model_is_uid_1000_with_no_supplementary_groups(layer: Layer, run: Run) -> None:
    output = run(layer.image, layer.tool("id", "model")).ok()
    assert output.strip() == "uid=1000(model) gid=1000(model) groups=1000(model)"


@pytest.mark.docker
def test_sse_runner_is_a_system_user_with_its_own_group_no_home_and_no_login(
    layer: Layer, run: Run
) -> None:
    accounts = json.loads(run(layer.image, [RUNTIME_PYTHON, "-I", "-c", ACCOUNTS_PROBE]).ok())
    users = {entry[0]: entry for entry in accounts["users"]}
    _, _, uid, gid, _, home, shell = users["sse-runner"]
    assert 100 <= uid < 1000 and gid == uid
    assert shell.endswith("/nologin")
    assert [name for name, number, _ in accounts["groups"] if number == gid] == ["sse-runner"]
    members = {name for _, _, group_members in accounts["groups"] for name in group_members}
    assert not members & {"sse-runner", "model"}, "neither is in any other group"
    assert [entry[0] for entry in accounts["users"] if entry[2] == 1000] == ["model"]
    assert [entry[0] for entry in accounts["users"] if entry[2] == uid] == ["sse-runner"]
    assert tree(run, layer.image, home) == {}, f"sse-runner's home {home} exists"


@pytest.mark.docker
def test_the_source_is_a_git_repository_with_one_commit_and_nothing_uncommitted(
    layer: Layer, run: Run
) -> None:
    source = layer.config.source
    log = run(layer.image, ["git", "log", "--format=%H %s"], user="model", workdir=source).ok()
    assert len(log.splitlines()) == 1, log
    status = run(
        layer.image, ["git", "status", "--porcelain", "--ignored=no"], user="model", workdir=source
    ).ok()
    assert status == ""


@pytest.mark.docker
def test_nothing_is_world_writable_outside_sticky_folders(layer: Layer, run: Run) -> None:
    writable = run(
        layer.image, layer.tool("find", "/", "-xdev", "!", "-type", "l", "-perm", "-0002")
    )
    sticky = run(layer.image, layer.tool("find", "/", "-xdev", "-type", "d", "-perm", "-1000"))
    found = set(writable.stdout.split())
    assert "/tmp" in found, "find reports the world-writable /tmp"
    assert found - set(sticky.stdout.split()) == set()


@pytest.mark.docker
def test_a_case_image_with_another_uid_1000_user_gets_a_fresh_model_and_loses_that_user(
    docker_client: docker.DockerClient, tool_image: Any, run: Run, stat_paths: StatPaths
) -> None:
    image = tool_image(UID1000, DATASET)
    groups = [run(image, ["getent", "group", name]).stdout.strip() for name in ("users", "staff")]
    assert groups == ["users:x:100:", "staff:x:50:"], "builder is in no group any more"
    assert run(image, ["getent", "group", "builders"]).status == 2
    assert run(image, ["getent", "passwd", "builder"]).status == 2
    sudo = run(image, ["cat", "/etc/sudoers.d/builder"]).ok()
    assert sudo.startswith("# disabled by SSEBench: builder ALL=")
    facts = stat_paths(
        image,
        [
            "/opt/toolchain/cc",
            "/home/builder/project/run-me.sh",
            "/ssebench-repo/run-me.sh",
            "/home/model",
        ],
    )
    assert owner(facts["/opt/toolchain/cc"])[:2] == ("root", "root"), "uid 1000's files are root's"
    assert owner(facts["/home/builder/project/run-me.sh"]) == ("model", "model", "0o755")
    assert owner(facts["/ssebench-repo/run-me.sh"]) == ("root", "root", "0o755")
    assert owner(facts["/home/model"]) == ("model", "model", "0o700")
    tracked = run(image, ["git", "ls-files"], user="model", workdir="/home/builder/project").ok()
    assert tracked.split() == [".gitignore", "README", "keep.gen", "run-me.sh", "vendor/lib/v.c"]
    history = run(image, ["git", "-C", "/ssebench-repo", "log", "--format=%s"]).ok()
    assert history.split("\n")[:2] == ["second", "first"], "the graded copy keeps its history"
    config = docker_client.images.get(image).attrs["Config"]
    assert config.get("User") in ("0:0", "root", "0")


@pytest.mark.docker
def test_an_image_without_shell_git_or_tmp_gets_the_bundled_ones(
    tool_image: Any, run: Run, stat_paths: StatPaths
) -> None:
    image = tool_image(BUSYBOX, DATASET)
    facts = stat_paths(image, ["/bin/bash", "/bin/sh", "/usr/bin/git", "/tmp"])
    assert {path: facts[path]["kind"] for path in facts} == {
        "/bin/bash": "link",
        "/bin/sh": "link",
        "/usr/bin/git": "link",
        "/tmp": "dir",
    }
    assert facts["/tmp"]["mode"] == "0o1777"
    output = run(image, ["/bin/sh", "-c", 'echo "$BASH_VERSION"; git --version']).ok()
    assert output.startswith("5.") and "git version 2." in output
