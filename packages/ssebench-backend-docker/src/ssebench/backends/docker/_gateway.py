"""The model gateway on Docker: one LiteLLM proxy container per engine (per registry prefix).

Where it runs and how runs reach it:

- The proxy container (`<registry>-gateway`, image `<registry>/gateway:<lock>`)
  sits on its own ordinary bridge network, `<registry>-gateway-egress`, from
  which it reaches the providers (and the host, as `host.docker.internal`).
- A run that may use a model gets its own network (internal, on a guarded
  `sseb-` bridge, when restricted; see `_egress.py`); the proxy is connected to
  that network under the alias `ssebench-gateway` before the run starts, which
  the run resolves through the engine's DNS on its network. The run's
  network holds the run and the proxy only: it reaches the proxy's port and
  nothing else (no route out, the host rule drops new connections to the host,
  other runs are on other networks). A second container of the same run (the
  sidecar's) joins the same network and reaches the proxy the same way.
- Its configuration (models with their provider keys, the master key) is one
  file, written by the host into a root-only folder on a tmpfs
  (`/run/ssebench-gateway/<name>/config.yaml`) and bind-mounted read-only: it is
  never on a command line or in an environment variable (`docker inspect`
  shows both).
- Run keys, budgets and spend are rows of a SQLite file in the state folder
  `<cache>/gateway/<name>/`, bind-mounted read-write: the runner writes keys
  into it, the proxy's hook reads them (`_gateway_store.py`), and it survives
  a restart of the proxy.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import sqlite3
import stat
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec
from typing_extensions import override

import docker
import docker.types
from ssebench.backends.docker._cache import cache_lock, cache_root
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._gateway_image import build_gateway_image
from ssebench.backends.docker._gateway_store import KeyStore
from ssebench.spec import (
    DEFAULT_RESERVATION,
    BackendError,
    GatewayReport,
    ModelGateway,
    ModelsFile,
    PlatformNotFoundError,
    PlatformRefusedError,
    find_home,
    labels,
    registry,
    settings,
)
from ssebench.spec.atomic import write_atomically

GATEWAY_LABEL: Final = labels.PREFIX + "gateway"
"""Label of the gateway's container and network; the value is the gateway's name."""

GATEWAY_ALIAS: Final = "ssebench-gateway"
"""The host name a run reaches the gateway by."""

GATEWAY_PORT: Final = 4000
"""The port the proxy listens on."""

SECRETS_MOUNT: Final = "/run/ssebench-gateway"
"""Where the proxy reads its configuration (a read-only bind of a host tmpfs folder)."""

STATE_MOUNT: Final = "/var/lib/ssebench-gateway"
"""Where the proxy keeps the key store (a bind of the host's state folder)."""

SECRETS_ROOT_ENV: Final = settings.GATEWAY_SECRETS.name
"""Environment variable naming the tmpfs folder for the gateway's configuration
(default `/run/ssebench-gateway`, else `/dev/shm/ssebench-gateway`)."""

START_TIMEOUT: Final = 180.0
"""Seconds the proxy may take to answer after its container starts."""

_HOOK: Final = "ssebench_gateway_hook"


_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def gateway_name() -> str:
    """The gateway container's name: `SSEBENCH_GATEWAY`, else the registry prefix made a
    name, then `-gateway`.

    Raises:
        BackendError: `SSEBENCH_GATEWAY` is not a container name (it also names folders
            on this host, so it may hold no `/` and no `..`).
    """
    explicit = os.environ.get(settings.GATEWAY.name)
    if explicit is None:
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", registry()).strip("-.") + "-gateway"
    if not _NAME.fullmatch(explicit) or ".." in explicit:
        raise BackendError(
            f"{settings.GATEWAY.name}={explicit!r} is not a gateway name: up to 63 letters, "
            "digits, '_', '.' and '-', starting with a letter or digit, no '..'"
        )
    return explicit


def _filesystem(path: Path) -> str:
    """The type of the filesystem `path` is on (from /proc/self/mounts; '' if unknown)."""
    best, kind = "", ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) < 3:
                continue
            mount = fields[1]
            inside = str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best):
                best, kind = mount, fields[2]
    return kind


def _secrets_dir(name: str) -> Path:
    """The folder of the gateway's configuration: on a tmpfs, so no key ever reaches a disk."""
    explicit = os.environ.get(SECRETS_ROOT_ENV)
    if explicit:
        root = Path(explicit)
    elif _filesystem(Path("/run")) == "tmpfs" and os.access("/run", os.W_OK):
        root = Path("/run/ssebench-gateway")
    else:
        root = Path("/dev/shm/ssebench-gateway")
    return root / name


def _quiet(_line: str) -> None:
    pass


@contextlib.contextmanager
def _store_errors(what: str) -> Iterator[None]:
    """The key store's failures (SQLite, its folder) as one BackendError line."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise BackendError(f"{what} failed: the gateway's key store: {exc}") from exc


def state_dir(name: str) -> Path:
    """The host folder of the gateway's key store."""
    return cache_root() / "gateway" / name


def _private_dir(path: Path) -> Path:
    """`path` (and its parent) made if needed, checked to be our own real folders, 0700.

    Raises:
        BackendError: either is a link, not a folder, or someone else's (a shared
            place such as /dev/shm could hold one planted there).
    """
    path.parent.parent.mkdir(parents=True, exist_ok=True)
    for folder in (path.parent, path):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise BackendError(f"{folder} is not a folder of this user: remove it")
        folder.chmod(0o700)
    return path


def provider_key(env: str | None) -> str | None:
    """The provider key of a model from the host variable `env` names ('' if it needs none).

    Returns:
        The key, '' when the model needs none, None when the variable is unset or empty.
    """
    if env is None:
        return ""
    return os.environ.get(env) or None


def _is_price(param: str) -> bool:
    """Whether a LiteLLM parameter is a price (`input_cost_per_token`, `tiered_pricing`, ...)."""
    return "cost" in param or param == "tiered_pricing"


def gateway_config(models: ModelsFile, master_key: str) -> dict[str, Any]:
    """LiteLLM's configuration: every model whose provider key is at hand, and our hooks
    (`ssebench.models`: what the hook enforces per model, which LiteLLM does not read)."""
    model_list = []
    policies: dict[str, dict[str, int]] = {}
    for name, entry in sorted(models.models.items()):
        key = provider_key(entry.key_env)
        if key is None:
            continue
        params = {k: v for k, v in entry.litellm.items() if not _is_price(k)}
        if key:
            params["api_key"] = key
        # The gateway's own retries of 429s, 5xx and timeouts (with backoff), and its bound
        # on each call; the models file's `litellm` may name LiteLLM's own instead.
        params.setdefault("num_retries", entry.retries)
        params.setdefault("timeout", entry.timeout)
        policies[name] = {
            "concurrency": entry.concurrency,
            "provider_failures": entry.provider_failures,
        }
        # Prices go to model_info: LiteLLM registers them once, with the deployment.
        # In litellm_params it registers them again on every call, which also clears
        # its model-info caches (measured: ~3.5 ms of CPU per call).
        prices = {k: v for k, v in entry.litellm.items() if _is_price(k)}
        model_list.append(
            {"model_name": name, "litellm_params": params}
            | ({"model_info": prices} if prices else {})
        )
    return {
        "model_list": model_list,
        "general_settings": {"master_key": master_key, "custom_auth": f"{_HOOK}.custom_auth"},
        "litellm_settings": {"callbacks": [f"{_HOOK}.handler"], "drop_params": True},
        # A failed call would cool its model down for every run of this gateway: one
        # run's bad request (or its provider's 429) must not refuse another's calls.
        "router_settings": {"disable_cooldowns": True},
        "ssebench": {"models": policies},
    }


@dataclass(frozen=True)
class GatewayStatus:
    """What `ssebench proxy status` shows."""

    name: str
    state: str
    """`running`, `exited`, ... or `absent`."""
    image: str | None = None
    address: str | None = None
    """`host:port` at which this host reaches the proxy."""
    models: tuple[str, ...] = ()


class DockerGateway(ModelGateway):
    """The gateway's container on the local engine, and its key store."""

    def __init__(
        self,
        client: docker.DockerClient,
        name: str | None = None,
        *,
        reservation: float = DEFAULT_RESERVATION,
    ) -> None:
        self._client = client
        self.name = name or gateway_name()
        self._reservation = reservation
        self.store = KeyStore(state_dir(self.name) / "keys.db")

    @property
    @override
    def base_url(self) -> str:
        return f"http://{GATEWAY_ALIAS}:{GATEWAY_PORT}"

    @property
    def egress_network(self) -> str:
        """The ordinary bridge network from which the proxy reaches the providers."""
        return f"{self.name}-egress"

    # --- the container -------------------------------------------------------

    def _container(self) -> dict[str, Any] | None:
        try:
            with engine_errors(f"inspecting the gateway {self.name}"):
                found: dict[str, Any] = self._client.api.inspect_container(self.name)
                return found
        except PlatformNotFoundError:
            return None

    def status(self) -> GatewayStatus:
        """The gateway's container as the engine sees it."""
        attrs = self._container()
        if attrs is None:
            return GatewayStatus(name=self.name, state="absent")
        config = self._read_config()
        served = tuple(m["model_name"] for m in (config or {}).get("model_list", []))
        address = self.host_address(attrs)
        return GatewayStatus(
            name=self.name,
            state=str(attrs["State"].get("Status", "unknown")),
            image=str(attrs["Config"].get("Image")),
            address=f"{address}:{GATEWAY_PORT}" if address else None,
            models=served,
        )

    def host_address(self, attrs: dict[str, Any] | None = None) -> str | None:
        """The proxy's address on its egress network, where this host reaches it."""
        attrs = attrs if attrs is not None else self._container()
        if attrs is None:
            return None
        networks = attrs["NetworkSettings"]["Networks"]
        return (networks.get(self.egress_network) or {}).get("IPAddress") or None

    def _config_path(self) -> Path:
        return _secrets_dir(self.name) / "config.yaml"

    def _read_config(self) -> dict[str, Any] | None:
        import yaml

        try:
            loaded = yaml.safe_load(self._config_path().read_text())
        except (OSError, yaml.YAMLError):
            return None
        return loaded if isinstance(loaded, dict) else None

    def up(self, models: ModelsFile, *, say: Callable[[str], None] = _quiet) -> GatewayStatus:
        """Start the gateway serving `models` (those whose keys are at hand), or keep it.

        A running gateway is kept when it already serves every such model with the
        same parameters and keys; otherwise it is started again with the new
        configuration (the key store and every open key survive, and runs on their
        networks get it back at the same address).

        One start at a time per engine and gateway: the runs of `eval -j N` each call
        this, and the first starts the gateway while the others wait for it and keep it.

        Raises:
            BackendError: the image cannot be built, or the proxy does not answer.
        """
        with cache_lock("gateway", f"{self._client.api.base_url}\0{self.name}"):
            return self._up(models, say)

    def _up(self, models: ModelsFile, say: Callable[[str], None]) -> GatewayStatus:
        import yaml

        old = self._read_config()
        master = (old or {}).get("general_settings", {}).get("master_key")
        config = gateway_config(models, master or "sk-master-" + secrets.token_urlsafe(32))
        wanted = config["model_list"]
        policies = config["ssebench"]["models"]
        old_policies = (old or {}).get("ssebench", {}).get("models", {})
        attrs = self._container()
        image = build_gateway_image(self._client, find_home(), progress=lambda line: say(line.text))
        if (
            attrs is not None
            and attrs["State"].get("Running")
            and attrs["Image"] == image.image_id
            and old is not None
            and all(entry in old.get("model_list", []) for entry in wanted)
            and all(old_policies.get(name) == policy for name, policy in policies.items())
        ):
            return self.status()
        if old is not None:
            # Keep what the running proxy serves too: another run may be using it.
            kept = [
                e
                for e in old.get("model_list", [])
                if e["model_name"] not in {w["model_name"] for w in wanted}
            ]
            config["model_list"] = sorted([*kept, *wanted], key=lambda e: e["model_name"])
            kept_names = {e["model_name"] for e in kept}
            config["ssebench"]["models"] = {
                **{n: p for n, p in old_policies.items() if n in kept_names},
                **policies,
            }
        secrets_dir = _private_dir(_secrets_dir(self.name))
        state = _private_dir(state_dir(self.name))
        self.store.initialize()
        write_atomically(secrets_dir / "config.yaml", yaml.safe_dump(config).encode())
        (secrets_dir / "config.yaml").chmod(0o600)
        runs = self._run_networks(attrs)
        self.down(keep_config=True)
        host = self._ensure_egress_network()
        say(f"gateway: starting {self.name}")
        with engine_errors(f"starting the gateway {self.name}", family=BackendError):
            host_config = self._client.api.create_host_config(
                network_mode=self.egress_network,
                mounts=[
                    docker.types.Mount(
                        SECRETS_MOUNT, str(secrets_dir), type="bind", read_only=True
                    ),
                    docker.types.Mount(STATE_MOUNT, str(state), type="bind"),
                ],
                tmpfs={"/tmp": "size=256m"},
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                # This host, as the proxy reaches it: its address on the proxy's own bridge.
                extra_hosts={"host.docker.internal": host},
                restart_policy={"Name": "unless-stopped"},
                log_config=docker.types.LogConfig(
                    type=docker.types.LogConfig.types.JSON,
                    config={"max-size": "32m", "max-file": "2"},
                ),
            )
            created = self._client.api.create_container(
                image.image_id,
                name=self.name,
                labels={GATEWAY_LABEL: self.name},
                host_config=host_config,
            )
            self._client.api.start(created["Id"])
            for network in runs:
                # Runs find it by its alias on their network (the engine's DNS), so
                # a new address there is found too.
                with contextlib.suppress(PlatformNotFoundError, PlatformRefusedError):
                    self._client.api.connect_container_to_network(
                        self.name, network, aliases=[GATEWAY_ALIAS]
                    )
        self.wait_ready()
        return self.status()

    def _run_networks(self, attrs: dict[str, Any] | None) -> dict[str, str]:
        """The runs' networks the proxy is on, with its address on each."""
        if attrs is None:
            return {}
        networks: dict[str, dict[str, str]] = attrs["NetworkSettings"]["Networks"]
        return {
            name: found["IPAddress"]
            for name, found in networks.items()
            if name != self.egress_network and found.get("IPAddress")
        }

    def _ensure_egress_network(self) -> str:
        """Create the proxy's own network if needed; return this host's address on it."""
        try:
            with engine_errors(f"creating network {self.egress_network}"):
                # check_duplicate: the engine would otherwise make a second one of the name.
                self._client.networks.create(
                    self.egress_network,
                    driver="bridge",
                    labels={GATEWAY_LABEL: self.name},
                    check_duplicate=True,
                )
        except PlatformRefusedError:
            pass  # it exists
        return self.host_on_egress()

    def host_on_egress(self) -> str:
        """This host's address on the proxy's own network (`host.docker.internal` for it).

        Raises:
            BackendError: the network is missing or has no gateway address.
        """
        with engine_errors(f"inspecting network {self.egress_network}", family=BackendError):
            network = self._client.api.inspect_network(self.egress_network)
        for pool in (network.get("IPAM") or {}).get("Config") or []:
            if pool.get("Gateway"):
                return str(pool["Gateway"])
        raise BackendError(f"network {self.egress_network} has no gateway address")

    def wait_ready(self, timeout: float = START_TIMEOUT) -> float:
        """Wait until the proxy answers its liveness route; return the seconds waited.

        Raises:
            BackendError: it stopped, or did not answer in `timeout` seconds.
        """
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            attrs = self._container()
            if attrs is None or attrs["State"].get("Status") in ("exited", "dead"):
                raise BackendError(
                    f"the gateway {self.name} stopped while starting: see `docker logs {self.name}`"
                )
            address = self.host_address(attrs)
            if address:
                url = f"http://{address}:{GATEWAY_PORT}/health/liveliness"
                with (
                    contextlib.suppress(OSError, urllib.error.URLError),
                    urllib.request.urlopen(url, timeout=2) as answer,
                ):
                    if answer.status == 200:
                        return time.monotonic() - started
            time.sleep(0.25)
        raise BackendError(f"the gateway {self.name} did not answer within {timeout:.0f}s")

    def restart(self) -> None:
        """Restart the proxy's container (its keys and spend are in the store)."""
        with engine_errors(f"restarting the gateway {self.name}", family=BackendError):
            self._client.api.restart(self.name, timeout=10)
        self.wait_ready()

    def down(self, *, keep_config: bool = False) -> bool:
        """Remove the proxy's container (and its configuration file); True if there was one."""
        attrs = self._container()
        if attrs is not None:
            for network in attrs["NetworkSettings"]["Networks"]:
                if network != self.egress_network:
                    with contextlib.suppress(BackendError):
                        self.disconnect(network)
            with contextlib.suppress(PlatformNotFoundError), engine_errors("removing the gateway"):
                self._client.api.remove_container(self.name, force=True)
        if not keep_config:
            self._config_path().unlink(missing_ok=True)
        return attrs is not None

    # --- runs' networks ------------------------------------------------------

    def connect(self, network: str) -> tuple[str, str]:
        """Put the proxy on a run's network; return its address there and the network's CIDR.

        Raises:
            BackendError: the gateway is not running, or the engine refused.
        """
        attrs = self._container()
        if attrs is None or not attrs["State"].get("Running"):
            raise BackendError(f"the model gateway {self.name} is not running")
        with engine_errors(f"connecting the gateway to {network}", family=BackendError):
            self._client.api.connect_container_to_network(
                self.name, network, aliases=[GATEWAY_ALIAS]
            )
            attrs = self._client.api.inspect_container(self.name)
        found = attrs["NetworkSettings"]["Networks"].get(network) or {}
        address, prefix = found.get("IPAddress"), found.get("IPPrefixLen")
        if not address or not prefix:
            raise BackendError(f"the gateway got no address on {network}")
        return str(address), f"{address}/{prefix}"

    def disconnect(self, network: str) -> None:
        """Take the proxy off a run's network (best effort, never raises if it is not on it)."""
        with (
            contextlib.suppress(PlatformNotFoundError, PlatformRefusedError),
            engine_errors(f"disconnecting the gateway from {network}"),
        ):
            self._client.api.disconnect_container_from_network(self.name, network, force=True)

    # --- keys ---------------------------------------------------------------

    @override
    def open_key(self, run_id: str, models: list[str], budget: float | None) -> str:
        with _store_errors("opening the run's model key"):
            return self.store.create_key(run_id, models, budget, self._reservation)

    @override
    def close_key(self, run_id: str) -> GatewayReport | None:
        with _store_errors("closing the run's model key"):
            used = self.store.revoke(run_id)
        if used is None:
            return None
        return msgspec.convert(used.report(), GatewayReport)
