"""The cluster objects of the model gateway and of a run that reaches it (no cluster needed)."""

from __future__ import annotations

import json

from kubernetes import client

from ssebench.backends.k8s import _gateway_deploy, _objects
from ssebench.backends.k8s._gateway import GATEWAY_LABEL, GATEWAY_NAME, GATEWAY_PORT
from ssebench.spec import Egress, Mount, NetworkPolicy, RunSpec, contract

_API = client.ApiClient()


def _policy(egress: Egress, model_proxy: bool) -> dict[str, object]:
    spec = RunSpec(
        run_id="r",
        task_name="t",
        mode="sandbox",
        image="i",
        env={},
        results=Mount(target=contract.RESULTS_DIR, source="/r"),
        archive=Mount(target=contract.ARCHIVE_DIR, source="/a"),
        network=NetworkPolicy(egress=egress, model_proxy=model_proxy),
    )
    made = _API.sanitize_for_serialization(_objects.network_policy("job", {}, spec))
    assert isinstance(made, dict)
    return made


def test_a_restricted_model_run_may_reach_the_gateways_pods_on_its_port_and_nothing_else() -> None:
    spec = _policy("restricted", True)["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec["ingress"] == []
    assert spec["egress"] == [
        {
            "to": [{"podSelector": {"matchLabels": {GATEWAY_LABEL: GATEWAY_NAME}}}],
            "ports": [{"protocol": "TCP", "port": GATEWAY_PORT}],
        }
    ]


def test_a_restricted_run_without_a_model_reaches_nothing_and_an_open_one_everything() -> None:
    assert _policy("restricted", False)["spec"]["egress"] == []  # type: ignore[index]
    assert _policy("open", True)["spec"]["egress"] == [{}]  # type: ignore[index]


def test_the_gateways_pod_spec_holds_no_key_and_runs_as_nobody_on_a_read_only_root() -> None:
    made = _API.sanitize_for_serialization(_gateway_deploy.deployment("reg/gw@sha256:0", "d"))
    text = json.dumps(made)
    assert "sk-" not in text and '"env"' not in text
    pod = made["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    config = next(v for v in pod["volumes"] if v["name"] == "config")
    assert config["secret"]["secretName"] == GATEWAY_NAME
    for container in [*pod["initContainers"], *pod["containers"]]:
        security = container["securityContext"]
        assert security["runAsUser"] == 65534 and security["readOnlyRootFilesystem"] is True
        assert security["capabilities"] == {"drop": ["ALL"]}


def test_the_gateways_digest_ignores_its_master_key_and_follows_models_and_image() -> None:
    config = {"model_list": [{"model_name": "m"}], "general_settings": {"master_key": "sk-a"}}
    other_key = {**config, "general_settings": {"master_key": "sk-b"}}
    digest = _gateway_deploy.config_digest(config, "img")
    assert digest == _gateway_deploy.config_digest(other_key, "img")
    assert digest != _gateway_deploy.config_digest(config, "img2")
    assert digest != _gateway_deploy.config_digest({**config, "model_list": []}, "img")


def test_only_runs_pods_may_open_connections_to_the_gateway() -> None:
    made = _API.sanitize_for_serialization(_gateway_deploy.network_policy())
    assert made["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = made["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {_objects.BACKEND_LABEL: "k8s"}}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": GATEWAY_PORT}]
