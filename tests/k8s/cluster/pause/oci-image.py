#!/usr/bin/env python3
"""Write a one-layer OCI image archive (for `ctr images import`) from files.

Usage: oci-image.py OUT.tar NAME ENTRYPOINT SRC:DEST[:MODE]...
The result is reproducible: fixed mtimes, owners and order.
"""

import gzip
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path


def blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def main() -> None:
    out, name, entrypoint, *files = sys.argv[1:]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as layer:
        for spec in files:
            src, dest, *mode = spec.split(":")
            content = Path(src).read_bytes()
            info = tarfile.TarInfo(dest.lstrip("/"))
            info.size, info.mode, info.mtime = len(content), int(mode[0] if mode else "755", 8), 0
            layer.addfile(info, io.BytesIO(content))
    diff_id = "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()
    layer_digest, layer_data = blob(gzip.compress(raw.getvalue(), mtime=0))
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": [entrypoint], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    config_digest, config_data = blob(json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": len(config_data),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": layer_digest,
                "size": len(layer_data),
            }
        ],
    }
    manifest_digest, manifest_data = blob(json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": len(manifest_data),
                "annotations": {"org.opencontainers.image.ref.name": name},
                "platform": {"architecture": "amd64", "os": "linux"},
            }
        ],
    }
    entries = [
        ("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode()),
        ("index.json", json.dumps(index, sort_keys=True).encode()),
    ] + [
        ("blobs/sha256/" + d.split(":")[1], data)
        for d, data in (
            (layer_digest, layer_data),
            (config_digest, config_data),
            (manifest_digest, manifest_data),
        )
    ]
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for path, data in entries:
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    main()
