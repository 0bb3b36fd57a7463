"""`copy_from_image` on a cluster: a short pod of the image, and `cat` of the file over exec.

Exec, not the pod's log: a log is text the kubelet may have rotated or
collected, exec's stdout is the file's bytes. The exec is tried from the pod's
creation on, not once its status says Running: the kubelet execs into a
container as soon as it runs, and reports it running up to a second later.
"""

from __future__ import annotations

import secrets
import threading
from pathlib import Path
from typing import Final

from kubernetes import client

from ssebench.backends.k8s._api import api_errors
from ssebench.backends.k8s._exec import run_in
from ssebench.backends.k8s._objects import BACKEND_LABEL, PULL_POLICY
from ssebench.backends.k8s._rest import request
from ssebench.spec import BackendError
from ssebench.spec.atomic import write_atomically

_TIMEOUT: Final = 300


class CopyFromImageError(BackendError, RuntimeError):
    """A file cannot be copied out of an image (also RuntimeError, as the seed says)."""


def _warm() -> None:
    """Import the client's models the run's start builds (a fifth of a second of CPU)
    while the exec waits for the pod."""
    for name in ("V1Job", "V1NetworkPolicy", "V1Secret"):
        getattr(client, name)


def copy_from_image(api: client.ApiClient, ns: str, image: str, path: str, dest: Path) -> None:
    """Write `path` of `image` to `dest`.

    Raises:
        CopyFromImageError: the pod failed (no such file) or dest cannot be written.
    """
    name = "ssebench-copy-" + secrets.token_hex(4)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {BACKEND_LABEL: "copy"}},
        "spec": {
            "containers": [
                {
                    "name": "copy",
                    "image": image,
                    "imagePullPolicy": PULL_POLICY,
                    "command": ["sleep", str(_TIMEOUT)],
                }
            ],
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 0,
        },
    }
    pods = f"/api/v1/namespaces/{ns}/pods"
    what = f"copying {path} out of {image}"
    try:
        with api_errors(what):
            request(api, "POST", pods, body=pod).drain_conn()
        warm = threading.Thread(target=_warm, daemon=True)
        warm.start()
        code, out = run_in(api, ns, name, "copy", ["cat", "--", path], until_started=_TIMEOUT)
        warm.join()
        with out:
            data = out.read()
        if code != 0:
            raise CopyFromImageError(f"{what} failed: no such file in the image (cat: exit {code})")
    except BackendError as exc:
        if isinstance(exc, CopyFromImageError):
            raise
        raise CopyFromImageError(str(exc)) from None
    finally:
        try:
            with api_errors(f"removing pod {name}"):
                request(api, "DELETE", f"{pods}/{name}", {"gracePeriodSeconds": "0"}).drain_conn()
        except BackendError:
            pass
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(dest, data)
    except OSError as exc:
        raise CopyFromImageError(f"{what} failed: cannot write {dest}: {exc}") from exc
