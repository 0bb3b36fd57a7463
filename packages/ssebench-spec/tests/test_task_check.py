"""What is found wrong with a task before a build: missing files, offline-unfit Dockerfiles."""

from __future__ import annotations

from pathlib import Path

from ssebench.spec import check_dataset, dockerfile_problems, from_lines
from ssebench.spec._task_check import folder_path

CONFIG = """\
id: {id}
project: p
repository: r
language: go
source: /src/p
task_description: {{issue: broken, crash_report: [reports/asan.txt]}}
scripts: {{build: scripts/build.sh, run: scripts/run.sh}}
files: {{patch: diffs/patch.diff, poc: [pocs/go/main.go, pocs/two.bin]}}
"""

GOOD_DOCKERFILE = """\
# A comment, then the base.
ARG SSEBENCH_BASE_IMAGE
FROM ${SSEBENCH_BASE_IMAGE} AS tools
RUN apt-get update \\
 && apt-get install -y golang
FROM $SSEBENCH_BASE_IMAGE
COPY --from=tools /usr/lib/go /usr/lib/go
FROM tools
FROM scratch
"""


def test_config_paths_map_to_the_task_folders_own_paths() -> None:
    assert folder_path("config.yaml") == "sse/config.yaml"
    assert folder_path("scripts/run.sh") == "sse/run.sh"
    assert folder_path("pocs/go/main.go") == "sse/pocs/go/main.go"
    assert folder_path("./diffs/patch.diff") == "sse/diffs/patch.diff"


def test_a_dockerfile_from_the_base_image_with_stages_and_scratch_is_fine() -> None:
    assert dockerfile_problems(GOOD_DOCKERFILE) == []


def test_an_earlier_tasks_dockerfile_names_each_line_and_how_to_adapt_it() -> None:
    text = (
        "FROM gcr.io/oss-fuzz-base/base-builder\n"
        "# fetched at build time:\n"
        "RUN apt-get install -y git && \\\n"
        "    git clone --depth 1 https://github.com/example/p /src/p\n"
        "ADD https://example.invalid/p.tar.gz /src/\n"
        "RUN wget -q http://example.invalid/x && make\n"
        "RUN make CURL=1\n"
    )
    found = dockerfile_problems(text)
    assert [line.split(":")[0] for line in found] == [
        "Dockerfile line 1",
        "Dockerfile line 3",
        "Dockerfile line 5",
        "Dockerfile line 6",
    ]
    assert "`ARG SSEBENCH_BASE_IMAGE` and `FROM ${SSEBENCH_BASE_IMAGE}`" in found[0]
    assert "put the sources in the task folder (the build context) and COPY them" in found[1]
    assert all("docs/tasks.md" in line for line in found)


def test_from_lines_give_the_arg_defaults_before_the_first_from() -> None:
    defaults, froms = from_lines("ARG A=x:1\nARG B\nFROM ${A} AS one\nARG C=no\nFROM one\n")
    assert defaults == {"A": "x:1", "B": ""}
    assert [(line.number, line.image, line.stage) for line in froms] == [
        (3, "${A}", "one"),
        (5, "one", None),
    ]


def make_task(dataset: Path, task_id: str, files: list[str]) -> Path:
    folder = dataset / task_id
    (folder / "sse").mkdir(parents=True)
    (folder / "sse" / "config.yaml").write_text(CONFIG.format(id=task_id))
    for name in files:
        (folder / "sse" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "sse" / name).write_text(name)
    (folder / "Dockerfile").write_text(GOOD_DOCKERFILE)
    return folder


EVERY_FILE = [
    "build.sh",
    "run.sh",
    "diffs/patch.diff",
    "pocs/go/main.go",
    "pocs/two.bin",
    "reports/asan.txt",
]


def test_every_task_of_a_dataset_is_checked_and_one_broken_task_hides_none(
    tmp_path: Path,
) -> None:
    dataset = tmp_path / "set"
    make_task(dataset, "a-missing", ["build.sh", "diffs/patch.diff", "pocs/two.bin"])
    make_task(dataset, "b-good", EVERY_FILE)
    make_task(dataset, "c_bad__name", EVERY_FILE)
    (make_task(dataset, "d-no-dockerfile", EVERY_FILE) / "Dockerfile").unlink()
    (dataset / "dataset.yaml").write_text("version: '1'\n")

    found = {entry.id: entry for entry in check_dataset(dataset)}

    assert list(found) == ["a-missing", "b-good", "c_bad__name", "d-no-dockerfile"]
    assert found["a-missing"].problems == [
        "sse/run.sh (scripts.run 'scripts/run.sh') is missing",
        "sse/pocs/go/main.go (files.poc 'pocs/go/main.go') is missing",
        "sse/reports/asan.txt (task_description.crash_report 'reports/asan.txt') is missing",
    ]
    assert found["b-good"].problems == []
    assert found["b-good"].task is not None
    assert found["c_bad__name"].task is None
    assert "invalid task ID 'c_bad__name'" in found["c_bad__name"].problems[0]
    assert found["d-no-dockerfile"].problems[0].startswith("Dockerfile cannot be read")


def test_a_listed_file_outside_the_task_folder_is_missing(tmp_path: Path) -> None:
    dataset = tmp_path / "set"
    folder = make_task(dataset, "escape", EVERY_FILE)
    config = (folder / "sse" / "config.yaml").read_text()
    (folder / "sse" / "config.yaml").write_text(config.replace("pocs/two.bin", "../Dockerfile"))
    (dataset / "dataset.yaml").write_text("version: '1'\n")
    [entry] = check_dataset(dataset)
    assert entry.problems == ["sse/../Dockerfile (files.poc '../Dockerfile') is missing"]
