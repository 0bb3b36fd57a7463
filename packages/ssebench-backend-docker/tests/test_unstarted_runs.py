"""What a runner that died while starting a run leaves on the engine lists as that run."""

from __future__ import annotations

from ssebench.backends.docker._runs import label_filters, made_first_filters, unstarted_runs
from ssebench.spec import labels

RUN_LABELS = {labels.RUN_ID: "r1", labels.RESULTS: "/res/t/none/a/r1", labels.LEASE_PID: "7"}


def test_a_runs_volumes_without_its_containers_are_one_unstarted_run() -> None:
    volumes = [
        {"Name": f"ssebench-r1-{part}", "CreatedAt": "2026-12-04T18:33:14Z",
         "Labels": {**RUN_LABELS, labels.RUN: "r1"}}
        for part in ("source", "sockets")
    ]  # fmt: skip

    (run,) = unstarted_runs(volumes, [], set())

    assert (run.run_id, run.state, run.created_at) == ("r1", "created", "2026-12-04T18:33:14Z")
    assert run.labels[labels.LEASE_PID] == "7"
    assert (run.handle.pair, run.handle.network, run.handle.container_id) == ("r1", None, "")


def test_its_network_is_named_in_the_handle_so_removing_the_run_removes_it() -> None:
    volume = {"Name": "ssebench-r1-source", "CreatedAt": "2026-12-04T18:33:14Z",
              "Labels": {**RUN_LABELS, labels.RUN: "r1"}}  # fmt: skip
    network = {"Name": "ssebench-r1-abc123", "Created": "2026-12-04T18:33:14.5Z",
               "Labels": RUN_LABELS}  # fmt: skip

    (run,) = unstarted_runs([volume], [network], set())

    assert (run.name, run.handle.network, run.handle.pair) == (
        "ssebench-r1-abc123",
        "ssebench-r1-abc123",
        "r1",
    )


def test_a_started_run_and_an_unlabelled_volume_are_not_unstarted_runs() -> None:
    volumes = [
        {"Name": "ssebench-r1-source", "Labels": {**RUN_LABELS, labels.RUN: "r1"}},
        {"Name": "someone-elses", "Labels": {}},
    ]

    assert unstarted_runs(volumes, [], {"r1"}) == []


def test_an_empty_wanted_value_asks_for_the_label_whatever_its_value() -> None:
    assert label_filters({labels.WEBUI: "true", labels.RUN_ID: ""}) == {
        "label": [f"{labels.WEBUI}=true", labels.RUN_ID]
    }


def test_the_volumes_asked_for_are_the_named_runs_only() -> None:
    assert made_first_filters(None) == {"label": [labels.RUN_ID]}
    assert made_first_filters({labels.RUN_ID: "r1", labels.WEBUI: "true"}) == {
        "label": [f"{labels.RUN_ID}=r1", f"{labels.WEBUI}=true"]
    }
