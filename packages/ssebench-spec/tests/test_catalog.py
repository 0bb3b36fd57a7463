"""The task catalog's files: checksums of a task folder, the manifest, the lock, the source."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ssebench.spec import UserError, load_dataset
from ssebench.spec.catalog import (
    LOCK_FILE,
    case_source,
    folder_problem,
    load_catalog,
    manifest_of,
    registry_host,
    task_files,
    write_catalog,
)

CONFIG = """\
id: {id}
project: p
repository: r
language: python
source: /src/p
task_description: {{issue: broken}}
scripts: {{build: build.sh}}
files: {{patch: diffs/patch.diff}}
"""


def make_dataset(root: Path) -> Path:
    (root / "t1" / "sse" / "diffs").mkdir(parents=True)
    (root / "dataset.yaml").write_text('version: "3"\nname: Demo\n')
    (root / "t1" / "sse" / "config.yaml").write_text(CONFIG.format(id="t1"))
    (root / "t1" / "sse" / "build.sh").write_text("make\n")
    (root / "t1" / "sse" / "build.sh").chmod(0o755)
    (root / "t1" / "sse" / "diffs" / "patch.diff").write_text("--- a\n")
    (root / "t1" / "Dockerfile").write_text("FROM x\n")
    return root


def test_task_files_lists_every_file_with_its_digest_its_x_bit_and_links_by_target(
    tmp_path: Path,
) -> None:
    folder = make_dataset(tmp_path) / "t1"
    (folder / "sse" / "__pycache__").mkdir()
    (folder / "sse" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (folder / "sse" / "alias.sh").symlink_to("build.sh")
    (folder / "sse" / "linked-dir").symlink_to("diffs")

    found = task_files(folder)

    assert sorted(found) == [
        "Dockerfile",
        "sse/alias.sh",
        "sse/build.sh",
        "sse/config.yaml",
        "sse/diffs/patch.diff",
        "sse/linked-dir",
    ]
    assert found["sse/build.sh"].startswith("sha256:") and found["sse/build.sh"].endswith(" +x")
    assert not found["Dockerfile"].endswith(" +x")
    assert found["sse/alias.sh"] == "link:build.sh"
    assert found["sse/linked-dir"] == "link:diffs"


def test_a_special_file_in_a_task_folder_is_refused(tmp_path: Path) -> None:
    folder = make_dataset(tmp_path) / "t1"
    os.mkfifo(folder / "pipe")

    with pytest.raises(UserError, match="a task folder holds only files, folders and links"):
        task_files(folder)


def test_folder_problem_names_what_changed_is_missing_or_was_added(tmp_path: Path) -> None:
    folder = make_dataset(tmp_path) / "t1"
    files = task_files(folder)
    assert folder_problem(folder, files) is None

    (folder / "sse" / "build.sh").chmod(0o644)  # the x bit alone is a change
    assert folder_problem(folder, files) == (
        f"{folder} differs from the manifest: sse/build.sh changed"
    )
    (folder / "Dockerfile").unlink()
    (folder / "extra").write_text("x")
    (folder / "more").write_text("x")
    assert folder_problem(folder, files) == (
        f"{folder} differs from the manifest: sse/build.sh changed, Dockerfile is missing, "
        "extra is not in the manifest and 1 more"
    )
    assert folder_problem(tmp_path / "gone", files) == f"{tmp_path / 'gone'} does not exist"


def test_a_manifest_written_is_read_back_with_its_lock(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path)
    manifest = manifest_of("Demo", "3", "d", load_dataset(dataset))
    lock = {"case/demo/t1:3": "sha256:" + "0" * 64}

    written = write_catalog(dataset, manifest, lock)
    catalog = load_catalog(written[0])

    assert written == [dataset / "manifest.json", dataset / LOCK_FILE]
    assert catalog.manifest == manifest
    assert catalog.lock == lock
    assert catalog.manifest.tasks[0].case_image == "case/demo/t1:3"
    assert (written[0].stat().st_mode & 0o777) == 0o644


def _edit(path: Path, change: dict[str, object]) -> None:
    data = json.loads(path.read_text())
    data["tasks"][0].update(change)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": "../t1"}, "invalid task ID '../t1'"),
        ({"case_image": "case/other/t1:3"}, "task 't1' names the case image 'case/other/t1:3'"),
    ],
)
def test_a_manifest_whose_task_is_inconsistent_is_refused(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    dataset = make_dataset(tmp_path)
    path = write_catalog(dataset, manifest_of("Demo", "3", None, load_dataset(dataset)), None)[0]
    _edit(path, change)

    with pytest.raises(UserError, match=r"^catalog .*manifest\.json: ") as caught:
        load_catalog(path)

    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("prefix", "host"),
    [
        ("ssebench", None),
        ("ssebench-l", None),
        ("team/ssebench", None),
        ("127.0.0.1:5000/ssebench", "127.0.0.1:5000"),
        ("localhost/x", "localhost"),
        ("registry.example/x/y", "registry.example"),
    ],
)
def test_only_a_registry_host_counts_as_a_registry(
    monkeypatch: pytest.MonkeyPatch, prefix: str, host: str | None
) -> None:
    monkeypatch.setenv("SSEBENCH_REGISTRY", prefix)

    assert registry_host() == host


def test_the_source_pulls_by_digest_by_tag_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = make_dataset(tmp_path)
    digest = "sha256:" + "1" * 64
    write_catalog(dataset, manifest_of("Demo", "3", None, load_dataset(dataset)), None)
    unlocked = load_catalog(dataset / "manifest.json")
    write_catalog(dataset, unlocked.manifest, {"case/demo/t1:3": digest})
    locked = load_catalog(dataset / "manifest.json")
    entry = locked.manifest.tasks[0]
    monkeypatch.setenv("SSEBENCH_REGISTRY", "127.0.0.1:5000/p")

    assert case_source(locked, entry, build=False).pull == f"127.0.0.1:5000/p/case/demo/t1@{digest}"
    assert case_source(unlocked, entry, build=False).pull == "127.0.0.1:5000/p/case/demo/t1:3"
    assert case_source(locked, entry, build=True).pull is None
    monkeypatch.setenv("SSEBENCH_REGISTRY", "ssebench")
    assert case_source(locked, entry, build=False).pull is None
    assert case_source(locked, entry, build=False).files == entry.files
