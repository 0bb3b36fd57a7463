"""The checks of the tool layer's contract (docs/architecture.md), each a sentence.

They were the built-in layer's own tests (tests/images/test_tool_layer.py); any
tool layer must pass them, since the daemon, the evaluator and the integrity
rules rely on them. Each raises AssertionError naming what is wrong. They run
the runtime's own Python in the image (`/opt/ssebench/bin/python3.11`), so they
need nothing of the case image but what the contract itself requires (`git`
for the agent's repository, `bash`).
"""

from __future__ import annotations

import json
from typing import Any, Final

from ssebench.conformance._tool_layer import ToolLayerCheck, ToolLayerSubject
from ssebench.spec import contract

ENTRYPOINT: Final = (contract.RUNTIME_PYTHON, "-I", "-m", "ssebench.daemon.entrypoint")
"""PID 1 of every tool image (docs/architecture.md): SSEBench's entrypoint, never a path the
working directory can shadow."""

_ROOT_USERS: Final = frozenset({"", "0", "0:0", "root", "root:root"})

# Every path under the roots given, with its owner, group, mode and kind, as JSON.
_TREE = r"""
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

# Owner, group, mode and kind of each path given (null for a missing one).
_STAT = r"""
import grp, json, os, pwd, stat, sys

def name(lookup, number):
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)

facts = {}
for path in sys.argv[1:]:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        facts[path] = None
        continue
    facts[path] = [name(pwd.getpwuid, info.st_uid), name(grp.getgrgid, info.st_gid),
                   oct(stat.S_IMODE(info.st_mode))]
print(json.dumps(facts))
"""

# What the user running it can read of each path given ("yes"/"no").
_READ = r"""
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

_ACCOUNTS = r"""
import grp, json, os, pwd
model = pwd.getpwnam("model")
print(json.dumps({
    "users": [list(p)[:7] for p in pwd.getpwall()],
    "groups": [[g.gr_name, g.gr_gid, g.gr_mem] for g in grp.getgrall()],
    "model_groups": sorted(os.getgrouplist("model", model.pw_gid)),
}))
"""

# World-writable paths on the root filesystem, and which of them are sticky folders.
_WORLD_WRITABLE = r"""
import json, os, stat
device = os.lstat("/").st_dev
found = {}
for folder, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.lstat(os.path.join(folder, d)).st_dev == device]
    for path in [folder] + [os.path.join(folder, f) for f in files]:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode) or not info.st_mode & stat.S_IWOTH:
            continue
        found[path] = bool(stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX)
print(json.dumps(found))
"""


def _tree(subject: ToolLayerSubject, *tops: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = json.loads(subject.python(_TREE, *tops))
    return found


def _hidden(subject: ToolLayerSubject) -> list[str]:
    files = subject.config.files
    named = ["config.yaml", files.patch, files.future_test, *files.poc]
    named += subject.config.task_description.crash_report
    return [f"{contract.TASK_DIR}/{path}" for path in named if path]


def _scripts(subject: ToolLayerSubject) -> list[str]:
    scripts = subject.config.scripts
    return [
        f"{contract.TASK_DIR}/{path}" for path in (scripts.build, scripts.run, scripts.test) if path
    ]


def its_entrypoint_is_ssebenchs_and_it_starts_as_root(subject: ToolLayerSubject) -> None:
    assert subject.entrypoint == ENTRYPOINT, (
        f"ENTRYPOINT is {list(subject.entrypoint)}, not {list(ENTRYPOINT)}"
    )
    assert subject.user in _ROOT_USERS, f"USER is {subject.user!r}: the entrypoint starts as root"


def every_path_of_the_contract_has_its_owner_and_mode(subject: ToolLayerSubject) -> None:
    expected = {
        contract.TASK_DIR: ["root", "root", "0o700"],
        contract.SCRIPTS_DIR: ["root", "root", "0o700"],
        contract.REPO_DIR: ["root", "root", "0o700"],
        contract.RUNTIME_DIR: ["root", "root", "0o755"],
        "/var/lib/ssebench": ["root", "root", "0o700"],
        contract.RESULTS_DIR: ["root", "root", "0o700"],
        contract.ARCHIVE_DIR: ["model", "model", "0o700"],
        contract.SCRATCH_DIR: ["root", "sse-runner", "0o710"],
        contract.SOCKET_DIR: ["root", "root", "0o700"],
        "/tmp": ["root", "root", "0o1777"],
    }
    expected |= {path: ["root", "root", "0o600"] for path in _hidden(subject)}
    # Every task's scripts are executable in its dataset: root's programs here.
    expected |= {path: ["root", "root", "0o700"] for path in _scripts(subject)}
    source = subject.config.source
    facts = json.loads(subject.python(_STAT, *expected, source))
    wrong = {path: facts[path] for path in expected if facts[path] != expected[path]}
    assert not wrong, f"[user, group, mode] not as the contract says: {wrong}"
    assert facts[source] is not None and facts[source][:2] == ["model", "model"], facts[source]


def under_ssebench_everything_is_roots_alone(subject: ToolLayerSubject) -> None:
    found = _tree(subject, contract.TASK_DIR)
    assert len(found) > 1, f"{contract.TASK_DIR} is empty"
    for path, facts in found.items():
        assert (facts["user"], facts["group"]) == ("root", "root"), path
        if facts["kind"] == "dir":
            assert facts["mode"] == 0o700, path
        elif facts["kind"] == "file":
            assert facts["mode"] in (0o600, 0o700), f"{path} is open to more than root"


def neither_the_agent_nor_sse_runner_can_read_anything_of_the_task_folder(
    subject: ToolLayerSubject,
) -> None:
    found = _tree(subject, contract.TASK_DIR)
    paths = [contract.TASK_DIR, *_hidden(subject), *_scripts(subject)]
    paths += sorted(set(found) - set(paths))
    for user in (contract.MODEL_USER, contract.RUNNER_USER):
        answers = json.loads(
            subject.python(_READ, *paths, contract.REPO_DIR, "/etc/passwd", user=user)
        )
        assert answers.pop("/etc/passwd") == "yes", "the probe reads what everyone may"
        assert set(answers.values()) == {"no"}, (user, answers)


def the_source_is_models_and_the_graded_copy_roots_with_the_same_files(
    subject: ToolLayerSubject,
) -> None:
    source = subject.config.source
    mine = _tree(subject, source)
    graded = _tree(subject, contract.REPO_DIR)
    for path, facts in mine.items():
        assert (facts["user"], facts["group"]) == ("model", "model"), path
        assert facts["mode"] & 0o6002 == 0, f"{path}: setuid, setgid or world-writable"
    for path, facts in graded.items():
        assert (facts["user"], facts["group"]) == ("root", "root"), path
        assert facts["mode"] & 0o6002 == 0, f"{path}: setuid, setgid or world-writable"

    def files(found: dict[str, Any], top: str) -> set[str]:
        relative = {path[len(top) :] for path in found if found[path]["kind"] != "dir"}
        return {path for path in relative if "/.git/" not in path + "/"}

    differ = files(mine, source) ^ files(graded, contract.REPO_DIR)
    assert not differ, f"in only one of the two copies: {sorted(differ)[:20]}"
    assert files(mine, source), "the project is not empty"


def the_opt_ssebench_runtime_is_roots_and_read_only_to_everyone_else(
    subject: ToolLayerSubject,
) -> None:
    found = _tree(subject, contract.RUNTIME_DIR)
    assert len(found) > 1000, "the runtime is incomplete"
    for path, facts in found.items():
        assert (facts["user"], facts["group"]) == ("root", "root"), path
        if facts["kind"] != "link":
            assert facts["mode"] & 0o022 == 0, f"{path} is writable by others"


def model_is_uid_1000_with_no_supplementary_groups(subject: ToolLayerSubject) -> None:
    accounts = json.loads(subject.python(_ACCOUNTS))
    users = {entry[0]: entry for entry in accounts["users"]}
    model = users[contract.MODEL_USER]
    assert model[2:4] == [contract.MODEL_UID, contract.MODEL_UID], f"model is {model}"
    assert accounts["model_groups"] == [contract.MODEL_UID], "model is in other groups"
    same_uid = [e[0] for e in accounts["users"] if e[2] == contract.MODEL_UID]
    assert same_uid == ["model"], f"users with uid 1000: {same_uid}"
    same_gid = [g[0] for g in accounts["groups"] if g[1] == contract.MODEL_UID]
    assert same_gid == ["model"], f"groups with gid 1000: {same_gid}"


def sse_runner_is_a_system_user_with_its_own_group_no_home_and_no_login(
    subject: ToolLayerSubject,
) -> None:
    accounts = json.loads(subject.python(_ACCOUNTS))
    users = {entry[0]: entry for entry in accounts["users"]}
    _, _, uid, gid, _, home, shell = users[contract.RUNNER_USER]
    assert 100 <= uid < 1000 and gid == uid, f"sse-runner is uid {uid}, gid {gid}"
    assert shell.endswith("/nologin"), f"sse-runner's shell is {shell}"
    own = [name for name, number, _ in accounts["groups"] if number == gid]
    assert own == ["sse-runner"], f"groups with sse-runner's gid: {own}"
    members = {name for _, _, group_members in accounts["groups"] for name in group_members}
    assert not members & {"sse-runner", "model"}, "neither is in any other group"
    same_uid = [entry[0] for entry in accounts["users"] if entry[2] == uid]
    assert same_uid == ["sse-runner"], f"users with sse-runner's uid: {same_uid}"
    assert _tree(subject, home) == {}, f"sse-runner's home {home} exists"


def the_source_is_a_git_repository_with_one_commit_and_nothing_uncommitted(
    subject: ToolLayerSubject,
) -> None:
    source = subject.config.source
    model = contract.MODEL_USER
    log = subject.run(["git", "log", "--format=%H %s"], user=model, workdir=source).ok()
    assert len(log.splitlines()) == 1, log
    status = subject.run(
        ["git", "status", "--porcelain", "--ignored=no"], user=model, workdir=source
    ).ok()
    assert status == "", status


def bash_and_git_are_on_the_path(subject: ToolLayerSubject) -> None:
    output = subject.run(
        ["bash", "-c", 'echo "$BASH_VERSION"; git --version'], user=contract.MODEL_USER
    ).ok()
    assert output.split("\n")[0][:1].isdigit() and "git version" in output, output


def nothing_is_world_writable_outside_sticky_folders(subject: ToolLayerSubject) -> None:
    found: dict[str, bool] = json.loads(subject.python(_WORLD_WRITABLE))
    assert found.get("/tmp") is True, "/tmp is a sticky world-writable folder"
    open_paths = sorted(path for path, sticky in found.items() if not sticky)
    assert not open_paths, f"world-writable outside sticky folders: {open_paths[:20]}"


TOOL_LAYER_CHECKS: Final[tuple[ToolLayerCheck, ...]] = (
    its_entrypoint_is_ssebenchs_and_it_starts_as_root,
    every_path_of_the_contract_has_its_owner_and_mode,
    under_ssebench_everything_is_roots_alone,
    neither_the_agent_nor_sse_runner_can_read_anything_of_the_task_folder,
    the_source_is_models_and_the_graded_copy_roots_with_the_same_files,
    the_opt_ssebench_runtime_is_roots_and_read_only_to_everyone_else,
    model_is_uid_1000_with_no_supplementary_groups,
    sse_runner_is_a_system_user_with_its_own_group_no_home_and_no_login,
    the_source_is_a_git_repository_with_one_commit_and_nothing_uncommitted,
    bash_and_git_are_on_the_path,
    nothing_is_world_writable_outside_sticky_folders,
)
"""Every check of the tool layer's contract, in the order they run."""
