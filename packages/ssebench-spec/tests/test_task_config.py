from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ssebench.spec import TaskConfigError, UserError, load_task_config, validate_task_id

VALID = """\
id: demo-task
project: demo
repository: bundled demo project
language: c
source: /src/demo
task_description:
  bug_description: heap overflow in the decoder
  crash_report: [reports/asan.txt]
scripts:
  build: scripts/build.sh
  run: scripts/run.sh
  test: scripts/test.sh
files:
  patch: diffs/patch.diff
  poc: [pocs/crash.bin]
  future_test: diffs/test.diff
sanitizer: address
reference: [https://example.invalid/advisory]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_valid_config_loads_with_all_four_checks(tmp_path: Path) -> None:
    config = load_task_config(write(tmp_path, VALID))
    assert config.id == "demo-task"
    assert config.task_description.crash_report == ["reports/asan.txt"]
    assert config.checks() == ("build", "poc", "function_test", "intent_test")


def test_checks_follow_from_the_scripts_and_files(tmp_path: Path) -> None:
    text = VALID.replace("  run: scripts/run.sh\n", "").replace(
        "  future_test: diffs/test.diff\n", ""
    )
    assert load_task_config(write(tmp_path, text)).checks() == ("build", "function_test")


def test_an_unknown_key_is_named_with_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, VALID + "colour: blue\n")
    with pytest.raises(TaskConfigError, match=rf"{path}: unknown key 'colour'"):
        load_task_config(path)


def test_an_unknown_nested_key_is_named_with_its_parent(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("  patch: diffs", "  pach: diffs/x\n  patch: diffs"))
    with pytest.raises(TaskConfigError, match=r"unknown key 'files.pach'"):
        load_task_config(path)


def test_the_two_legacy_keys_are_accepted_and_ignored(tmp_path: Path) -> None:
    text = VALID.replace("  patch:", "  security_test: a.diff\n  intent_test: b.diff\n  patch:")
    assert load_task_config(write(tmp_path, text)).checks()[-1] == "intent_test"


def test_a_missing_required_key_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("language: c\n", ""))
    with pytest.raises(TaskConfigError, match=r"missing required field `language`"):
        load_task_config(path)


def test_a_value_of_the_wrong_type_is_named_with_its_key(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("poc: [pocs/crash.bin]", "poc: 3"))
    with pytest.raises(TaskConfigError, match=r"key 'files.poc': Expected `array`, got `int`"):
        load_task_config(path)


def test_a_task_description_needs_at_least_one_part(tmp_path: Path) -> None:
    text = VALID.replace(
        "  bug_description: heap overflow in the decoder\n  crash_report: [reports/asan.txt]\n",
        "  issue: null\n",
    )
    with pytest.raises(TaskConfigError, match="needs at least one of 'issue', 'crash_report'"):
        load_task_config(write(tmp_path, text))


def test_the_source_must_be_absolute(tmp_path: Path) -> None:
    with pytest.raises(TaskConfigError, match="key 'source' must be an absolute path"):
        load_task_config(write(tmp_path, VALID.replace("/src/demo", "src/demo")))


def test_a_file_that_is_not_yaml_is_named(tmp_path: Path) -> None:
    with pytest.raises(TaskConfigError, match=r"config.yaml: not valid YAML"):
        load_task_config(write(tmp_path, "id: [unclosed\n"))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(TaskConfigError, match=r"nothing.yaml: cannot read"):
        load_task_config(tmp_path / "nothing.yaml")


@pytest.mark.parametrize("task_id", ["a", "demo-task", "CVE-2024.1_x", "x" * 128])
def test_valid_task_ids_pass(task_id: str) -> None:
    assert validate_task_id(task_id) == task_id


@pytest.mark.parametrize("task_id", ["", "-a", "a-", "a--b", "a/b", "a b", "ü", "x" * 129, "."])
def test_invalid_task_ids_say_what_is_allowed(task_id: str) -> None:
    with pytest.raises(UserError, match=r"invalid task ID .*letters and digits separated by"):
        validate_task_id(task_id)
