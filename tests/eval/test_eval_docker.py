"""`ssebench eval` on Docker: both demo tasks x reference and dummy x 2 repeats, 2 at a time;
the report says 100% and 0%, the same command again starts no container, and the page
opens in Chromium with those numbers on it (its screenshot kept in $SSEBENCH_EVAL_SCREENSHOTS,
default /var/tmp/ssebench-eval-screenshots)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from ssebench.spec import labels

from .chromium import open_page

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HOME = Path(__file__).resolve().parents[2]
SSEBENCH = str(Path(sys.executable).with_name("ssebench"))
DEMO_TASKS = ("pyarchive-path-traversal", "tlvkit-heap-overflow")
SHOTS = Path(os.environ.get("SSEBENCH_EVAL_SCREENSHOTS", "/var/tmp/ssebench-eval-screenshots"))
"""Where the report's screenshot is kept after the test, for a person to look at."""
EVAL = ["eval", "--agents", "reference,dummy", "--repeat", "2", "-j", "2", "--json"]


def ssebench(cwd: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SSEBENCH, *args],
        cwd=cwd,
        env={**os.environ, "SSEBENCH_HOME": str(HOME)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextlib.contextmanager
def container_starts(client: docker.DockerClient, root: Path) -> Iterator[list[str]]:
    """The names of the containers started, while entered, for runs recorded under `root`.

    The engine's event stream is read live: its memory of past events is short
    when other work shares the engine.
    """
    found: list[str] = []
    stream = client.events(decode=True, filters={"type": "container", "event": ["start"]})

    def read() -> None:
        try:
            for event in stream:
                attributes: dict[str, Any] = event.get("Actor", {}).get("Attributes", {})
                if attributes.get(labels.RESULTS, "").startswith(str(root)):
                    found.append(str(attributes.get("name")))
        except Exception:  # the stream is closed under the reader
            return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield found
    finally:
        time.sleep(2)  # the last events of the command reach the stream
        stream.close()
        reader.join(10)


def test_an_evaluation_of_the_demo_tasks_reports_reference_and_dummy_and_resumes(
    tmp_path: Path, docker_client: docker.DockerClient, base_image: str, chromium: str
) -> None:
    with container_starts(docker_client, tmp_path) as started:
        first = ssebench(tmp_path, *EVAL)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    rows = report["runs"]
    assert len(rows) == 8
    assert sorted((row["task"], row["agent"]) for row in rows) == sorted(
        (task, agent) for task in DEMO_TASKS for agent in ("reference", "dummy") for _ in (1, 2)
    )
    groups = {group["agent"]: group for group in report["groups"]}
    assert groups["reference"]["pass_rate"]["rate"] == 1.0
    assert groups["reference"]["pass_rate"]["counted"] == 4
    assert groups["dummy"]["pass_rate"]["rate"] == 0.0
    assert groups["dummy"]["pass_rate"]["counted"] == 4
    assert groups["dummy"]["checks"]["poc"]["passed"] == 0
    assert groups["dummy"]["checks"]["build"]["passed"] == 4
    assert len(started) == 8, started
    # Each run is where `ssebench runs results` finds it, with its provenance.
    listed = json.loads(ssebench(tmp_path, "runs", "results", "--json").stdout)
    assert len(listed) == 8
    for row in rows:
        summary = json.loads((Path(row["run_dir"]) / "summary.json").read_text())
        assert summary["provenance"]["images"]["agent"]
        assert summary["provenance"]["dataset"] == "demo"

    with container_starts(docker_client, tmp_path) as started_again:
        again = ssebench(tmp_path, *EVAL)
    assert again.returncode == 0, again.stderr
    assert "0 to run, 8 skipped" in again.stderr
    assert json.loads(again.stdout)["runs"] == rows
    assert started_again == []

    (folder,) = (tmp_path / "evals").iterdir()
    made = ssebench(tmp_path, "report", str(folder))
    assert made.returncode == 0, made.stderr
    SHOTS.mkdir(parents=True, exist_ok=True)
    screenshot = SHOTS / "report.png"
    screenshot.unlink(missing_ok=True)  # the size asserted below is this run's
    opened = open_page(chromium, folder / "report.html", tmp_path, screenshot=screenshot)
    print(f"screenshot of the report: {screenshot}")
    assert opened.page_requests == []
    assert "reference / none 100.0% (4/4, 95% CI 51.0%-100.0%)" in opened.text
    assert "dummy / none 0.0% (0/4, 95% CI 0.0%-49.0%)" in opened.text
    for task in DEMO_TASKS:
        assert task in opened.text
    assert screenshot.stat().st_size > 10_000
