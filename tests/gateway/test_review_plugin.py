"""The shipped `review` plugin against the scripted model, through the run's own key."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ssebench.backends.docker import DockerGateway

from .conftest import CALL_COST, MODEL, REPLY, Upstream, run_scripted_agent

pytestmark = pytest.mark.docker

TASK = "pyarchive-path-traversal"


def test_review_asks_the_run_model_to_compare_the_patch_with_the_reference(
    gateway: DockerGateway, upstream: Upstream, tmp_path: Path
) -> None:
    done = run_scripted_agent(upstream, tmp_path, "reference", TASK, None, "--plugin", "review")
    summary, run_dir = done.summary, done.run_dir
    (review,) = summary["plugin_results"]
    assert review["name"] == "review" and review["user"] == "root", review
    assert review["outcome"] == "ok", (run_dir / "plugins" / "review.log").read_text()
    assert summary["patch_result"]["status"] == "passed"  # the grade is the evaluator's

    # The model's answer is the review; the call went through the run's key.
    assert (run_dir / "plugins" / "review" / "review.md").read_text().strip() == REPLY
    record = json.loads((run_dir / "plugins" / "review" / "review.json").read_text())
    assert record["model"] == MODEL and record["status"] == "passed"
    # It compared the task's reference fix (from the daemon) with the agent's final patch.
    reference = (run_dir / "reference.patch").read_bytes()
    assert record["reference_sha256"] == hashlib.sha256(reference).hexdigest()
    final = (run_dir / "final.patch").read_bytes()
    assert record["patch_sha256"] == hashlib.sha256(final).hexdigest()
    assert len(done.calls) == 1
    assert summary["usage"]["calls"] == 1
    assert summary["spend"] == pytest.approx(CALL_COST)
