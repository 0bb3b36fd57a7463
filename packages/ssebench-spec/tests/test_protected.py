"""Protected globs: what they match, what is refused, and what `validate` says of a task."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ssebench.spec import TaskConfigError, check_dataset, load_task_config
from ssebench.spec._task_check import patch_paths
from ssebench.spec.protected import (
    DEFAULT_PROTECTED,
    ProtectedGlobError,
    ProtectedPaths,
    compile_glob,
    protected_paths,
)


@pytest.mark.parametrize(
    ("glob", "matched", "not_matched"),
    [
        ("conftest.py", ["conftest.py", "a/b/conftest.py"], ["conftest.pyc", "xconftest.py"]),
        ("*.pth", ["x.pth", "lib/site/evil.pth"], ["x.pth.txt", "pth"]),
        ("tests/**", ["tests/a.py", "tests/a/b/c.py"], ["src/tests.py", "a/tests/x.py"]),
        ("tests", ["tests", "tests/x.py", "a/tests/deep/y.py"], ["tests.py", "mytests/x"]),
        (".mvn/", [".mvn/maven.config", "sub/.mvn/jvm.config"], [".mvn"]),
        ("src/*/conftest.py", ["src/a/conftest.py"], ["src/conftest.py", "src/a/b/conftest.py"]),
        ("**/fixtures/*.json", ["fixtures/a.json", "x/y/fixtures/b.json"], ["fixtures/a/b.json"]),
        ("test_?.c", ["test_1.c", "t/test_x.c"], ["test_12.c", "test_/.c"]),
        ("[Mm]akefile", ["Makefile", "sub/makefile"], ["Xakefile"]),
        ("[!x]*.ini", ["pytest.ini"], ["x.ini"]),
        ("a**b", ["ab", "axxb"], ["a/b"]),
    ],
)
def test_a_glob_matches_as_gitignore_does(
    glob: str, matched: list[str], not_matched: list[str]
) -> None:
    compiled = compile_glob(glob)
    assert [path for path in matched if not compiled.matches(path)] == []
    assert [path for path in not_matched if compiled.matches(path)] == []


@pytest.mark.parametrize(
    ("glob", "said"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("/tests/**", "relative to the source tree: write 'tests/**'"),
        ("../etc/passwd", "no empty, '.' or '..' part"),
        ("tests//x", "no empty, '.' or '..' part"),
        ("./conftest.py", "no empty, '.' or '..' part"),
        ("tests\\x.py", "use '/' between folders"),
        ("test[s.py", "'[' has no closing ']'"),
        (" conftest.py", "no leading or trailing spaces"),
        ("a\nb", "no control characters"),
        ("*", "protects the whole tree"),
        ("**", "protects the whole tree"),
        ("**/*", "protects the whole tree"),
        ("*/**/", "protects the whole tree"),
        ("[z-a].py", "bad character range"),
        ("x" * 501, "longer than 500 characters"),
    ],
)
def test_a_glob_that_cannot_be_used_says_what_is_wrong(glob: str, said: str) -> None:
    with pytest.raises(ProtectedGlobError, match=None) as caught:
        compile_glob(glob)
    assert said in str(caught.value)


def test_more_globs_than_allowed_are_refused() -> None:
    with pytest.raises(ProtectedGlobError, match="at most 200"):
        ProtectedPaths([f"f{number}.py" for number in range(201)])


def test_without_a_list_the_language_default_applies_and_an_empty_list_protects_nothing() -> None:
    python = protected_paths(None, "Python")
    kept, dropped = python.split(
        ["conftest.py", "pkg/tests/conftest.py", "pytest.ini", "x/sitecustomize.py",
         "usercustomize.py", "lib/evil.pth", "setup.cfg", "tox.ini", "pyproject.toml",
         "pkg/_archive.py"]
    )  # fmt: skip
    assert kept == ["pkg/_archive.py"]
    assert len(dropped) == 9
    assert not protected_paths([], "python")
    assert protected_paths(None, "cobol").covering("conftest.py") is None
    assert protected_paths(None, "go").covering("pkg/zz_main_test.go") == "*_test.go"
    assert protected_paths(["tests/**"], "python").covering("conftest.py") is None
    for language, globs in DEFAULT_PROTECTED.items():
        assert ProtectedPaths(globs), language  # every default compiles


CONFIG = """\
id: {id}
project: p
repository: r
language: python
source: /src/p
task_description: {{issue: broken}}
scripts: {{test: scripts/test.sh}}
files: {{patch: diffs/patch.diff, future_test: diffs/test.diff}}
"""

PATCH = """\
diff --git a/pkg/core.py b/pkg/core.py
--- a/pkg/core.py
+++ b/pkg/core.py
@@ -1 +1 @@
-x
+y
diff --git "a/pkg/sp\\303\\251cial name.py" "b/pkg/sp\\303\\251cial name.py"
new file mode 100644
--- /dev/null
+++ "b/pkg/sp\\303\\251cial name.py"
@@ -0,0 +1 @@
+z
"""

TESTS = """\
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1 @@
+def test(): pass
"""


def write_task(dataset: Path, task_id: str, protected: str | None) -> Path:
    folder = dataset / task_id
    (folder / "sse" / "diffs").mkdir(parents=True)
    text = CONFIG.format(id=task_id) + ("" if protected is None else f"protected: {protected}\n")
    (folder / "sse" / "config.yaml").write_text(text)
    (folder / "sse" / "diffs" / "patch.diff").write_text(PATCH)
    (folder / "sse" / "diffs" / "test.diff").write_text(TESTS)
    script = folder / "sse" / "test.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    (folder / "Dockerfile").write_text("ARG SSEBENCH_BASE_IMAGE\nFROM ${SSEBENCH_BASE_IMAGE}\n")
    return folder


def test_a_patchs_paths_are_read_quoted_or_not() -> None:
    assert patch_paths(PATCH) == ["pkg/core.py", "pkg/spécial name.py"]
    assert patch_paths(TESTS) == ["tests/test_new.py"]


def test_validate_refuses_a_glob_over_the_reference_fix_and_warns_of_open_hidden_tests(
    tmp_path: Path,
) -> None:
    (tmp_path / "dataset.yaml").write_text('version: "1"\n')
    write_task(tmp_path, "covers-fix", "['pkg/**', 'tests/**']")
    write_task(tmp_path, "default", None)
    write_task(tmp_path, "empty", "[]")
    write_task(tmp_path, "good", "['tests/**', conftest.py]")
    write_task(tmp_path, "malformed", "['../x']")
    found = {check.id: check for check in check_dataset(tmp_path)}

    assert found["covers-fix"].problems == [
        "sse/config.yaml key 'protected': 'pkg/**' covers pkg/core.py, which the reference "
        "patch changes, so the reference fix would be dropped: narrow the glob",
        "sse/config.yaml key 'protected': 'pkg/**' covers pkg/spécial name.py, which the "
        "reference patch changes, so the reference fix would be dropped: narrow the glob",
    ]
    assert found["default"].problems == []
    assert found["default"].warnings == [
        "sse/config.yaml key 'protected' leaves the hidden tests' paths unprotected: "
        "tests/test_new.py (an agent could change or pre-create them)"
    ]
    assert found["empty"].warnings[0].startswith("sse/config.yaml key 'protected' is empty")
    assert found["good"].problems == found["good"].warnings == []
    (problem,) = found["malformed"].problems
    assert "key 'protected': protected glob '../x': no empty, '.' or '..' part" in problem


def test_loading_a_config_with_a_bad_glob_names_the_file_and_key(tmp_path: Path) -> None:
    folder = write_task(tmp_path, "t", "['**']")
    with pytest.raises(TaskConfigError) as caught:
        load_task_config(folder / "sse" / "config.yaml")
    assert str(caught.value) == (
        f"{folder / 'sse' / 'config.yaml'}: key 'protected': protected glob '**' protects "
        "the whole tree, so no change of the agent would be graded: name the files that "
        "judge a fix (tests, test-runner configuration)"
    )
    (folder / "sse" / "config.yaml").write_text(
        textwrap.dedent(CONFIG.format(id="t")) + "protected: tests/**\n"
    )
    with pytest.raises(TaskConfigError, match="protected"):
        load_task_config(folder / "sse" / "config.yaml")  # a string, not a list
