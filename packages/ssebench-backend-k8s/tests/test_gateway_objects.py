"""The cluster objects of the model gateway and of a run that reaches it (no cluster needed)."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from ssebench.backends.k8s import _gateway_deploy, _objects
from ssebench.backends.k8s._gateway import ADMIN_PORT, GATEWAY_LABEL, GATEWAY_NAME, GATEWAY_PORT
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


def test_a_restricted_model_run_may_reach_the_gateways_pods_on_its_port_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSEBENCH_K8S_GATEWAY_NAMESPACE", "gw")
    spec = _policy("restricted", True)["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec["ingress"] == []
    assert spec["egress"] == [
        {
            "to": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gw"}},
                    "podSelector": {"matchLabels": {GATEWAY_LABEL: GATEWAY_NAME}},
                }
            ],
            "ports": [{"protocol": "TCP", "port": GATEWAY_PORT}],
        }
    ]


def test_a_restricted_run_without_a_model_reaches_nothing_and_an_open_one_everything() -> None:
    assert _policy("restricted", False)["spec"]["egress"] == []  # type: ignore[index]
    assert _policy("open", True)["spec"]["egress"] == [{}]  # type: ignore[index]


def test_the_gateways_pod_spec_holds_no_key_and_runs_as_nobody_on_a_read_only_root() -> None:
    made = _API.sanitize_for_serialization(
        _gateway_deploy.deployment("reg/gw@sha256:0", "d", ["m"])
    )
    assert "sk-" not in json.dumps(made)
    pod = made["spec"]["template"]["spec"]
    # The environment: the admin's model names and address, nothing else, no key.
    environments = {c["name"]: c.get("env") for c in [*pod["initContainers"], *pod["containers"]]}
    assert environments == {
        "store": None,
        "proxy": None,
        "admin": [
            {"name": "GATEWAY_MODELS", "value": '["m"]'},
            {
                "name": "GATEWAY_POD_ADDRESS",
                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
            },
        ],
    }
    assert pod["automountServiceAccountToken"] is False
    config = next(v for v in pod["volumes"] if v["name"] == "config")
    assert config["secret"]["secretName"] == GATEWAY_NAME
    assert config["secret"]["items"] == [{"key": "config.yaml", "path": "config.yaml"}]
    token = next(v for v in pod["volumes"] if v["name"] == "token")
    assert token["secret"]["items"] == [{"key": "admin-token", "path": "token"}]
    # The admin container, which the runner's requests reach, never mounts the configuration.
    mounts = {c["name"]: {m["name"] for m in c["volumeMounts"]} for c in pod["containers"]}
    assert mounts == {"proxy": {"config", "state", "tmp"}, "admin": {"token", "state", "tmp"}}
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


def test_only_the_runs_pods_may_open_connections_to_the_proxys_port() -> None:
    made = _API.sanitize_for_serialization(_gateway_deploy.network_policy("runs"))
    assert made["spec"]["policyTypes"] == ["Ingress"]
    proxy, admin = made["spec"]["ingress"]
    assert proxy["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "runs"}},
            "podSelector": {"matchLabels": {_objects.BACKEND_LABEL: "k8s"}},
        }
    ]
    assert proxy["ports"] == [{"protocol": "TCP", "port": GATEWAY_PORT}]
    # The admin port: from wherever the API server's proxy connects; its token guards it.
    assert admin == {"ports": [{"protocol": "TCP", "port": ADMIN_PORT}]}


def test_the_digest_follows_the_runs_namespace_the_policy_names() -> None:
    config = {"model_list": [{"model_name": "m"}]}
    one = _gateway_deploy.config_digest(config, "img", "runs-a")
    assert one != _gateway_deploy.config_digest(config, "img", "runs-b")
