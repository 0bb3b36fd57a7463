"""`ssebench dataset validate`, `list` and `new`: all broken tasks at once; skeletons validate."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from .conftest import TASK_CONFIG, write_task

Cli = Callable[..., Result]

DEMO = Path(__file__).parents[3] / "datasets" / "demo"


def good_task(dataset: Path, task_id: str) -> Path:
    folder = write_task(dataset, task_id)
    for script in ("build.sh", "run.sh", "test.sh"):
        (folder / "sse" / script).chmod(0o755)
    return folder


def test_validate_reports_eight_kinds_of_broken_task_in_one_run(
    home: Path, cli: Cli, tmp_path: Path
) -> None:
    dataset = tmp_path / "broken"
    dataset.mkdir()
    (dataset / "dataset.yaml").write_text('version: "1"\n')
    good_task(dataset, "fine")
    # 1. a config that does not follow the schema
    (good_task(dataset, "b1-schema") / "sse" / "config.yaml").write_text("colour: blue\n")
    # 2. `id` is not the folder's name
    good_task(dataset, "b2-renamed").joinpath("sse", "config.yaml").write_text(TASK_CONFIG)
    # 3. a PoC the config names is missing
    (good_task(dataset, "b3-no-poc") / "sse" / "pocs" / "one.bin").unlink()
    # 4. a script the config names is missing
    (good_task(dataset, "b4-no-script") / "sse" / "run.sh").unlink()
    # 5. a script that is not executable
    (good_task(dataset, "b5-not-executable") / "sse" / "test.sh").chmod(0o644)
    # 6. FROM an image that is not the configured base
    good_task(dataset, "b6-from").joinpath("Dockerfile").write_text("FROM ssebench/base-c:1\n")
    # 7. a RUN that fetches from the network
    good_task(dataset, "b7-fetch").joinpath("Dockerfile").write_text(
        "ARG SSEBENCH_BASE_IMAGE\nFROM ${SSEBENCH_BASE_IMAGE}\n"
        "RUN git clone https://example.invalid/p.git /src/p\n"
    )
    # 8. no Dockerfile at all
    good_task(dataset, "b8-no-dockerfile").joinpath("Dockerfile").unlink()

    table = cli("dataset", "validate", "--local", str(dataset))
    listed = cli("dataset", "validate", "--local", str(dataset), "--json")

    assert table.exit_code == listed.exit_code == 1
    problems = {entry["id"]: entry["problems"] for entry in json.loads(listed.stdout)}
    assert problems.pop("fine") == []
    assert sorted(problems) == [
        f"b{n}-" + kind
        for n, kind in enumerate(
            [
                "schema",
                "renamed",
                "no-poc",
                "no-script",
                "not-executable",
                "from",
                "fetch",
                "no-dockerfile",
            ],
            1,
        )
    ]
    assert all(len(found) == 1 for found in problems.values()), problems
    assert "unknown key 'colour'" in problems["b1-schema"][0]
    assert (
        "key 'id' is 'demo-task' but the task folder is 'b2-renamed'" in problems["b2-renamed"][0]
    )
    assert problems["b3-no-poc"] == ["sse/pocs/one.bin (files.poc 'pocs/one.bin') is missing"]
    assert problems["b4-no-script"] == ["sse/run.sh (scripts.run 'scripts/run.sh') is missing"]
    assert problems["b5-not-executable"] == [
        "sse/test.sh (scripts.test) is not executable: chmod +x it"
    ]
    assert problems["b6-from"][0].startswith("Dockerfile line 1: FROM ssebench/base-c:1")
    assert problems["b7-fetch"][0].startswith("Dockerfile line 3: RUN git clone")
    assert problems["b8-no-dockerfile"][0].startswith("Dockerfile cannot be read")
    # Each problem once on stderr, named by its task; the summary line on stdout.
    said = table.stderr.splitlines()
    assert len(said) == 8 and all(line.startswith("ssebench: task b") for line in said)
    assert "8 of 9 tasks broken, 8 problem(s)" in table.stdout


def test_validate_refuses_protected_globs_over_the_fix_and_warns_of_open_hidden_tests(
    home: Path, cli: Cli, tmp_path: Path
) -> None:
    dataset = tmp_path / "protected"
    dataset.mkdir()
    (dataset / "dataset.yaml").write_text('version: "1"\n')
    fix = "--- a/tlv.c\n+++ b/tlv.c\n@@ -1 +1 @@\n-a\n+b\n"
    tests = "--- /dev/null\n+++ b/tests/test_new.c\n@@ -0,0 +1 @@\n+t\n"
    for task_id, protected in (
        ("covers", "['*.c']"),
        ("open", "[Makefile]"),
        ("unprotected", "[]"),
    ):
        folder = good_task(dataset, task_id)
        (folder / "sse" / "diffs" / "patch.diff").write_text(fix)
        (folder / "sse" / "diffs" / "test.diff").write_text(tests)
        config = folder / "sse" / "config.yaml"
        config.write_text(config.read_text() + f"protected: {protected}\n")

    outcome = cli("dataset", "validate", "--local", str(dataset))
    listed = json.loads(cli("dataset", "validate", "--local", str(dataset), "--json").stdout)

    assert outcome.exit_code == 1
    found = {entry["id"]: (entry["problems"], entry["warnings"]) for entry in listed}
    assert found["covers"][0] == [
        "sse/config.yaml key 'protected': '*.c' covers tlv.c, which the reference patch "
        "changes, so the reference fix would be dropped: narrow the glob"
    ]
    assert found["open"] == (
        [],
        [
            "sse/config.yaml key 'protected' leaves the hidden tests' paths unprotected: "
            "tests/test_new.c (an agent could change or pre-create them)"
        ],
    )
    assert found["unprotected"][0] == [] and "is empty" in found["unprotected"][1][0]
    assert "ssebench: task open: warning: sse/config.yaml key 'protected' leaves" in (
        outcome.stderr
    )
    assert "1 of 3 tasks broken, 1 problem(s)" in outcome.stdout


def test_validate_passes_the_demo_dataset(home: Path, cli: Cli) -> None:
    outcome = cli("dataset", "validate", "--local", str(DEMO))

    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stderr == ""
    assert "2 tasks, all valid" in outcome.stdout


def test_validate_reports_a_missing_dataset_in_one_line(cli: Cli, tmp_path: Path) -> None:
    outcome = cli("dataset", "validate", "--local", str(tmp_path / "nowhere"))

    assert outcome.exit_code == 1
    assert outcome.stderr == f"ssebench: dataset folder {tmp_path / 'nowhere'} does not exist\n"


def test_dataset_list_is_tasks_list(home: Path, cli: Cli) -> None:
    assert cli("dataset", "list", "--json").stdout == cli("tasks", "list", "--json").stdout


@pytest.mark.parametrize("language", ["c", "python", "rust"])
def test_a_new_skeleton_validates_and_says_what_to_fill_in(
    home: Path, cli: Cli, tmp_path: Path, language: str
) -> None:
    dataset = tmp_path / "mine"

    made = cli("dataset", "new", "my-bug", "--language", language, "--local", str(dataset))
    checked = cli("dataset", "validate", "--local", str(dataset), "--json")

    assert made.exit_code == 0, made.stderr
    assert made.stdout == f"{dataset / 'my-bug'}\n"
    assert checked.exit_code == 0, checked.stderr
    assert json.loads(checked.stdout)[0]["problems"] == []
    config = (dataset / "my-bug" / "sse" / "config.yaml").read_text()
    assert "id: my-bug" in config and f"language: {language}" in config and "TODO" in config
    assert "TODO" in (dataset / "my-bug" / "Dockerfile").read_text()


def test_new_refuses_an_existing_task_and_an_unknown_language(
    home: Path, cli: Cli, tmp_path: Path
) -> None:
    dataset = tmp_path / "mine"
    assert cli("dataset", "new", "one", "--language", "c", "--local", str(dataset)).exit_code == 0
    before = sorted(path.name for path in dataset.rglob("*"))

    again = cli("dataset", "new", "one", "--language", "c", "--local", str(dataset))
    unknown = cli("dataset", "new", "two", "--language", "cobol", "--local", str(dataset))
    invalid = cli("dataset", "new", "bad name", "--language", "c", "--local", str(dataset))

    assert again.exit_code == unknown.exit_code == invalid.exit_code == 1
    assert (
        again.stderr
        == f"ssebench: {dataset / 'one'} exists already: choose another ID or remove it\n"
    )
    assert unknown.stderr.startswith("ssebench: unknown language 'cobol': use one of c, c++,")
    assert "invalid task ID 'bad name'" in invalid.stderr
    assert sorted(path.name for path in dataset.rglob("*")) == before
