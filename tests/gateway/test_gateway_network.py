"""A restricted run that may use a model reaches the gateway's port and nothing else.

Real runs (the conformance probe image plus `probe/gateway_probe.sh`) started
through DockerBackend with `NetworkPolicy(egress="restricted", model_proxy=True)`.
The probe reports what it reached and what each chat call answered.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import docker
import msgspec
import pytest

from ssebench.backends.docker import GATEWAY_ALIAS, GATEWAY_PORT, DockerBackend, DockerGateway
from ssebench.conformance._network import Network, host_primary_address
from ssebench.spec import Mount, NetworkPolicy, RunSpec, contract, labels, load_models, registry

from .conftest import MODEL, REPLY, Upstream

pytestmark = pytest.mark.docker

PROBE_DIR = Path(__file__).resolve().parent / "probe"


@pytest.fixture(scope="session")
def gateway_probe(docker_client: docker.DockerClient, probe_image: str) -> str:
    tag = f"{registry()}-test/gateway-probe:1"
    docker_client.images.build(
        path=str(PROBE_DIR), tag=tag, buildargs={"PROBE_IMAGE": probe_image}, rm=True, pull=False
    )
    return tag


@pytest.fixture(scope="session")
def servers() -> Iterator[Network]:
    network = Network()
    yield network
    network.close()


def _spec(image: str, tmp: Path, run_id: str, key: str, env: dict[str, str]) -> RunSpec:
    results = tmp / run_id
    (results / "archive").mkdir(parents=True)
    return RunSpec(
        run_id=run_id,
        task_name="gateway-probe",
        mode="sandbox",
        image=image,
        env={
            contract.ENV_API_KEY: key,
            contract.ENV_BASE_URL: f"http://{GATEWAY_ALIAS}:{GATEWAY_PORT}",
            contract.ENV_MODEL_NAME: MODEL,
            **env,
        },
        results=Mount(target=contract.RESULTS_DIR, source=str(results)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(results / "archive")),
        network=NetworkPolicy(egress="restricted", model_proxy=True),
        labels={labels.RUN_ID: run_id},
    )


def test_a_restricted_run_reaches_the_gateway_and_nothing_else(
    gateway: DockerGateway,
    upstream: Upstream,
    gateway_probe: str,
    servers: Network,
    tmp_path: Path,
) -> None:
    backend = DockerBackend()
    # Run B: another run with a model, serving HTTP on 8080 on its own network.
    run_a, run_b = ("gwnet-" + secrets.token_hex(4) for _ in range(2))
    key_b = gateway.open_key(run_b, [MODEL], 1.0)
    spec_b = _spec(gateway_probe, tmp_path, run_b, key_b, {"GWPROBE_LISTEN": "1"})
    handle_b = backend.start(spec_b)
    revoked = gateway.open_key("gwnet-revoked", [MODEL], 1.0)
    gateway.close_key("gwnet-revoked")
    try:
        address_b = backend.endpoint(handle_b, 8080)
        # The host reaches B (so B's port is really open to whoever may reach it).
        for _ in range(50):
            try:
                with urllib.request.urlopen(f"{address_b}/index.html", timeout=2) as answer:
                    assert b"run b" in answer.read()
                    break
            except OSError:
                import time

                time.sleep(0.2)
        else:
            pytest.fail("run B does not serve")
        host_port = servers.host_server()
        upstream_port = upstream.model.port
        egress_address = gateway.host_address()
        blocked = [
            f"{host_primary_address()}:{upstream_port}",  # the provider, directly
            # The provider, at the address the gateway reaches it by.
            f"{gateway.host_on_egress()}:{upstream_port}",
            f"{host_primary_address()}:{host_port}",  # this host
            f"GATEWAY:{host_port}",  # this host, on the run's own bridge
            servers.internet_standin(),  # the internet
            address_b.removeprefix("http://"),  # another run
            f"{egress_address}:{GATEWAY_PORT}",  # the gateway, on another of its networks
        ]
        key_a = gateway.open_key(run_a, [MODEL], 1.0)
        targets = [f"{GATEWAY_ALIAS}:{GATEWAY_PORT}", *blocked]
        spec_a = _spec(
            gateway_probe,
            tmp_path,
            run_a,
            key_a,
            {
                "GWPROBE_TARGETS": " ".join(targets),
                "GWPROBE_OTHER_KEY": key_b,
                "GWPROBE_REVOKED_KEY": revoked,
            },
        )
        handle_a = backend.start(spec_a)
        try:
            assert backend.wait(handle_a, timeout=180) == 0
            lines = list(backend.logs(handle_a))
        finally:
            backend.cleanup(handle_a)
    finally:
        backend.stop(handle_b, grace=1)
        backend.cleanup(handle_b)
        gateway.close_key(run_b)
        gateway.close_key(run_a)
    reached = {}
    calls = {}
    for line in lines:
        if match := re.fullmatch(r"gwprobe: (reach|noreach) (\S+)", line):
            reached[match.group(2)] = match.group(1) == "reach"
        if match := re.fullmatch(r"gwprobe: call (\w+) (\d+) (.*)", line):
            calls[match.group(1)] = (match.group(2), match.group(3))
    assert reached.pop(f"{GATEWAY_ALIAS}:{GATEWAY_PORT}") is True, lines
    assert len(reached) == len(blocked), lines
    assert not any(reached.values()), reached
    assert calls["own"][0] == "200" and REPLY in calls["own"][1], calls
    assert calls["other"][0] == "401", calls
    assert calls["revoked"][0] == "401" and "not valid" in calls["revoked"][1], calls


def test_the_provider_key_is_in_no_environment_argv_inspect_or_log(
    gateway: DockerGateway,
    upstream: Upstream,
    gateway_probe: str,
    docker_client: docker.DockerClient,
    tmp_path: Path,
) -> None:
    secret = upstream.provider_key.encode()
    # A run whose chat call the gateway answered with the provider's key: its container,
    # its output and its run directory hold its own key only.
    backend = DockerBackend()
    run = "gwkey-" + secrets.token_hex(4)
    key = gateway.open_key(run, [MODEL], 1.0)
    spec = _spec(gateway_probe, tmp_path, run, key, {})
    handle = backend.start(spec)
    try:
        assert backend.wait(handle, timeout=180) == 0
        output = "\n".join(backend.logs(handle))
        assert re.search(r"gwprobe: call own 200 ", output), output
        seen = json.dumps(docker_client.api.inspect_container(handle.container_id)).encode()
        assert key.encode() in seen  # the look would find a key: it finds only the run's
        assert secret not in seen and secret not in output.encode()
        backend.collect_results(handle, Path(spec.results.source))
    finally:
        backend.cleanup(handle)
        gateway.close_key(run)
    for path in Path(spec.results.source).rglob("*"):
        assert not path.is_file() or secret not in path.read_bytes(), path
    attrs = docker_client.api.inspect_container(gateway.name)
    assert secret not in json.dumps(attrs).encode()
    assert secret not in docker_client.api.logs(gateway.name)
    pid = attrs["State"]["Pid"]
    processes = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False
    ).stdout.split()
    for process in [str(pid), *processes]:
        for part in ("environ", "cmdline"):
            assert secret not in Path(f"/proc/{process}/{part}").read_bytes(), (process, part)
    # Nor on any process's command line on this host (the runner's own included).
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            assert secret not in cmdline, entry
    # The configuration that holds it is root-only, on a tmpfs.
    sources = {m["Destination"]: m["Source"] for m in attrs["Mounts"]}
    config = Path(sources["/run/ssebench-gateway"]) / "config.yaml"
    assert config.stat().st_mode & 0o077 == 0
    fs = subprocess.run(
        ["stat", "-f", "-c", "%T", str(config)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert fs == "tmpfs"


def test_a_gateway_started_again_with_new_models_is_still_reached_by_running_runs(
    gateway: DockerGateway, gateway_probe: str, models_file: Path, tmp_path: Path
) -> None:
    backend = DockerBackend()
    run = "gwnet-" + secrets.token_hex(4)
    key = gateway.open_key(run, [MODEL], 1.0)
    spec = _spec(gateway_probe, tmp_path, run, key, {"GWPROBE_AWAIT": "go"})
    handle = backend.start(spec)
    try:
        before = gateway.status()
        models = load_models(models_file)
        more = msgspec.structs.replace(
            models, models={**models.models, "scripted-too": models.models[MODEL]}
        )

        after = gateway.up(more)

        assert after.models != before.models and "scripted-too" in after.models
        (Path(spec.results.source) / "go").touch()
        assert backend.wait(handle, timeout=180) == 0
        lines = list(backend.logs(handle))
    finally:
        backend.cleanup(handle)
        gateway.close_key(run)
    assert any(line.startswith("gwprobe: call own 200 ") for line in lines), lines
