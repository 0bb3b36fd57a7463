"""`ssebench eval --backend k8s --prebuilt` on the test cluster: several runs at once as
Jobs, each graded as `ssebench run` grades it, the report counted, nothing left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

from .test_runs import EXPECTED, ROOT, _cli, _gone

pytestmark = pytest.mark.k8s

TASK = "tlvkit-heap-overflow"


def test_an_evaluation_runs_its_cells_at_once_on_the_cluster_and_leaves_nothing(
    pushed_images: str,
    k8s_env: dict[str, str],
    kube: client.ApiClient,
    backend_namespace: str,
    tmp_path: Path,
) -> None:
    local = str(ROOT / "datasets/demo")
    args = ["eval", "--local", local, "--tasks", TASK, "--agents", "reference,dummy"]
    done = _cli([*args, "--repeat", "2", "-j", "4", "--prebuilt", "--json"], k8s_env, tmp_path)

    assert done.returncode == 0, done.stderr
    (folder,) = (tmp_path / "evals").iterdir()
    slots = json.loads((folder / "eval.json").read_text())["slots"]
    assert len(slots) == 4 and all(len(slot["run_ids"]) == 1 for slot in slots)
    for slot in slots:
        run_dir = tmp_path / "results" / TASK / "none" / slot["agent"] / slot["run_ids"][0]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["outcome"] == EXPECTED[slot["agent"]], summary
        assert summary["config"]["backend"] == "k8s"
        assert _gone(kube, backend_namespace, slot["run_ids"][0]) == []
    report = json.loads(done.stdout)
    assert report["settings"]["backend"] == "k8s"
    rates = {group["agent"]: group["pass_rate"] for group in report["groups"]}
    assert {agent: (rate["passed"], rate["counted"]) for agent, rate in rates.items()} == {
        "reference": (2, 2),
        "dummy": (0, 2),
    }
    markdown = (folder / "report.md").read_text()
    assert "| reference / none | 100.0% (2/2" in markdown, markdown
    assert "| dummy / none | 0.0% (0/2" in markdown, markdown
