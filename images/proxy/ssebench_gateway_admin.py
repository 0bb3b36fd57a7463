"""The gateway's key store from inside its pod: what a Kubernetes runner does by exec.

On Docker the runner opens the key store's SQLite file itself (a bind mount). On
Kubernetes the file lives in the gateway's pod, so the runner runs this module
there through the API (`pods/exec`, which its Role has):

    python3.11 -m ssebench_gateway_admin init
    python3.11 -m ssebench_gateway_admin open RUN_ID MODELS_JSON BUDGET RESERVATION
    python3.11 -m ssebench_gateway_admin bind RUN_ID CIDR
    python3.11 -m ssebench_gateway_admin close RUN_ID
    python3.11 -m ssebench_gateway_admin models

Each prints one JSON object on stdout. Nothing secret is on the command line: the
run's key is made here and printed once, on the exec's stdout, to the runner
alone. The backend binds it to the run pod's address as soon as the pod has one
(`bind`); from then on it works from that pod only.
Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same file, under the name the image gives it
    from ssebench.backends.docker._gateway_store import KeyStore
else:
    from ssebench_gateway_store import KeyStore

STATE = Path(os.environ.get("SSEBENCH_GATEWAY_STATE", "/var/lib/ssebench-gateway/keys.db"))
CONFIG = Path(os.environ.get("SSEBENCH_GATEWAY_CONFIG", "/run/ssebench-gateway/config.yaml"))


def _models() -> list[str]:
    # The configuration is YAML that yaml.safe_dump wrote; PyYAML is in the image (litellm's).
    import yaml

    config: dict[str, Any] = yaml.safe_load(CONFIG.read_text()) or {}
    return sorted(str(entry["model_name"]) for entry in config.get("model_list", []))


def main(argv: list[str]) -> dict[str, Any]:
    """Carry out one command; its answer."""
    store = KeyStore(STATE)
    command, args = argv[0], argv[1:]
    if command == "init":
        store.initialize()
        return {"initialized": str(STATE)}
    if command == "open":
        run_id, models, budget, reservation = args
        store.initialize()
        limit = None if budget == "none" else float(budget)
        key = store.create_key(run_id, json.loads(models), limit, float(reservation))
        return {"key": key}
    if command == "bind":
        run_id, network = args
        store.bind(run_id, network)
        return {"bound": network}
    if command == "close":
        (run_id,) = args
        store.initialize()
        used = store.revoke(run_id)
        return {"report": None if used is None else used.report()}
    if command == "models":
        return {"models": _models()}
    raise SystemExit(f"unknown command {command!r}: init, open, bind, close or models")


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1:])) + "\n")
