"""`Summary.provenance` and `eval.json`: new fields that older files do without."""

from __future__ import annotations

import json

from ssebench.spec import EvalRecord, Provenance, Summary, decode_json, encode_json

OLDER_SUMMARY = {
    "task": "demo-task",
    "config": {
        "agent": "dummy",
        "model": "none",
        "mode": "sandbox",
        "backend": "docker",
        "difficulty": 2,
        "timeout": 3600,
        "egress": "restricted",
        "reference_run": False,
        "keep": False,
    },
    "patch_result": {"status": "failed", "build_success": True},
    "runtime_result": {"agent_duration": 1.5},
    "run_id": "run-1",
    "started_at": "2025-01-02T03:04:05+00:00",
    "spend": None,
}


def test_a_summary_written_before_provenance_still_decodes() -> None:
    summary = decode_json(json.dumps(OLDER_SUMMARY).encode(), Summary, what="summary.json")

    assert summary.provenance is None
    assert summary.outcome is None


def test_a_summary_with_provenance_round_trips() -> None:
    provenance = Provenance(
        ssebench={"ssebench-runner": "0.1.0"},
        agent_version="1.0",
        dataset="demo",
        dataset_version="1",
        model="none",
        mode="sandbox",
        difficulty=2,
        images={"agent": "sha256:abc"},
        inputs="0" * 64,
    )
    data = json.dumps(
        {**OLDER_SUMMARY, "outcome": "failed", "provenance": json.loads(encode_json(provenance))}
    ).encode()

    assert decode_json(data, Summary, what="summary.json").provenance == provenance


def test_an_eval_record_without_updates_decodes() -> None:
    data = {
        "eval_id": "e",
        "created_at": "2025-01-02T03:04:05+00:00",
        "settings": {
            "dataset": "/d",
            "tasks": ["t"],
            "agents": ["dummy"],
            "models": ["none"],
            "mode": "sandbox",
            "difficulty": 2,
            "repeat": 1,
            "timeout": 60,
            "check_timeout": 60,
            "egress": "restricted",
            "backend": "docker",
        },
        "results": "/r",
        "slots": [{"task": "t", "agent": "dummy", "model": "none", "repeat": 1}],
    }

    record = decode_json(json.dumps(data).encode(), EvalRecord, what="eval.json")

    assert record.slots[0].run_ids == []
    assert record.updated_at is None
