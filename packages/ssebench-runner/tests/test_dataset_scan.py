"""`ssebench dataset scan`: what it looks for, a planted leak found in a real image, and the
demo tasks clean (docker)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ssebench.runner._scan import LINE_MIN, SHORT_MIN, added_lines, hidden_files
from ssebench.spec import load_dataset

HOME = Path(__file__).parents[3]
DEMO = HOME / "datasets" / "demo"
SSEBENCH = str(Path(sys.executable).parent / "ssebench")


def test_the_hidden_files_are_everything_but_the_crash_reports() -> None:
    task = next(task for task in load_dataset(DEMO) if task.id == "tlvkit-heap-overflow")

    assert sorted(hidden_files(task)) == [
        "sse/build.sh",
        "sse/config.yaml",
        "sse/diffs/patch.diff",
        "sse/diffs/test.diff",
        "sse/pocs/nested-truncated-long-length.bin",
        "sse/pocs/truncated-long-length.bin",
        "sse/run.sh",
        "sse/test.sh",
    ]


def test_only_the_fixs_distinctive_added_lines_are_looked_for() -> None:
    patch = (
        "--- a/x.c\n+++ b/x.c\n@@ -1,2 +1,4 @@\n ctx\n-old line that goes away here\n"
        "+    if (n > remaining) return TLV_ERR_TRUNCATED;\n+}\n+  return -1;\n+  n -= 2;\n"
    )

    assert added_lines(patch) == ["if (n > remaining) return TLV_ERR_TRUNCATED;"]
    assert all(len(line) >= LINE_MIN for line in added_lines(patch))
    # Short ones are looked for too, in pairs: "return -1;" and nothing shorter than SHORT_MIN.
    assert added_lines(patch, SHORT_MIN, LINE_MIN) == ["return -1;"]


def scan(dataset: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SSEBENCH_HOME": str(HOME)}
    env.pop("SSEBENCH_AGENT_PATH", None)
    return subprocess.run(
        [SSEBENCH, "dataset", "scan", "--local", str(dataset), "--json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


SHORT_FIX = """\
diff --git a/pyarchive/_limits.py b/pyarchive/_limits.py
new file mode 100644
--- /dev/null
+++ b/pyarchive/_limits.py
@@ -0,0 +1,2 @@
+MAX_NAME = 4095
+MAX_PARTS = 64
"""

LEFT_BEHIND = {
    # Both of the fix's short lines, re-indented among others: the fix.
    "limits.txt": "# limits\n    MAX_PARTS = 64\nother = 1\n  MAX_NAME = 4095\n",
    # One short line alone proves nothing.
    "one-limit.txt": "MAX_NAME = 4095\n",
}


@pytest.mark.docker
def test_scan_finds_a_patch_a_dockerfile_left_readable(tmp_path: Path) -> None:
    dataset = tmp_path / "leaky"
    dataset.mkdir()
    shutil.copy(DEMO / "dataset.yaml", dataset / "dataset.yaml")
    task = dataset / "leaky-pyarchive"
    shutil.copytree(DEMO / "pyarchive-path-traversal", task)
    config = task / "sse" / "config.yaml"
    config.write_text(
        config.read_text().replace("id: pyarchive-path-traversal", "id: leaky-pyarchive")
    )
    patch = task / "sse" / "diffs" / "patch.diff"
    patch.write_text(patch.read_text() + SHORT_FIX)
    (task / "left").mkdir()
    for name, text in LEFT_BEHIND.items():
        (task / "left" / name).write_text(text)
    # The hidden tests re-indented: no copy of test.diff, its lines all there.
    tests = (task / "sse" / "diffs" / "test.diff").read_text().splitlines()
    reworked = [f"    {line[1:]}" for line in tests if line[:1] == "+" and line[:3] != "+++"]
    (task / "left" / "notes.txt").write_text("\n".join(reworked) + "\n")
    dockerfile = task / "Dockerfile"
    # The author's slips: the fix copied where anyone can read it, and reworked copies of
    # the fix's short lines and of a hidden test.
    dockerfile.write_text(
        dockerfile.read_text()
        + "COPY sse/diffs/patch.diff /usr/share/doc/pyarchive/fix.diff\n"
        + "COPY left/ /usr/share/doc/pyarchive/left/\n"
        + "RUN chmod -R a+rX /usr/share/doc/pyarchive\n"
    )

    outcome = scan(dataset, tmp_path, "--agents", "dummy")

    assert outcome.returncode == 1, outcome.stderr[-3000:]
    [result] = json.loads(outcome.stdout)
    assert result["problems"] == []
    found = {(each["path"], each["what"]) for each in result["findings"]}
    assert (
        "/usr/share/doc/pyarchive/fix.diff",
        "a copy of sse/diffs/patch.diff, readable by model",
    ) in found
    assert (
        "/usr/share/doc/pyarchive/fix.diff",
        "lines the fix (sse/diffs/patch.diff) adds, readable by model",
    ) in found
    left = "/usr/share/doc/pyarchive/left"
    assert (
        f"{left}/limits.txt",
        "short lines the fix (sse/diffs/patch.diff) adds, two or more, readable by model",
    ) in found
    assert (
        f"{left}/notes.txt",
        "lines the hidden tests (sse/diffs/test.diff) add, readable by model",
    ) in found
    assert not [where for where, _ in found if where.endswith("one-limit.txt")], found
    assert "/usr/share/doc/pyarchive/fix.diff" in outcome.stderr


@pytest.mark.docker
def test_scan_passes_the_demo_tasks(tmp_path: Path) -> None:
    outcome = scan(DEMO, tmp_path)

    assert outcome.returncode == 0, outcome.stderr[-3000:]
    results = json.loads(outcome.stdout)
    assert [result["id"] for result in results] == [
        "pyarchive-path-traversal",
        "tlvkit-heap-overflow",
    ]
    for result in results:
        assert result["findings"] == [] and result["problems"] == []
        assert len(result["images"]) == 2  # reference's and dummy's
