"""The `artifact` plugin (after grading, as root): `manifest.json`, every result file of the
run with its size, SHA-256 and the component that wrote it.

Paths are relative to the run directory. It reads what the agent left in the archive,
so it never follows a link and reads regular files only (opened with O_NOFOLLOW and
checked after opening). Files written after it (the runner's `summary.json` and
`reference.patch`, the entrypoint's `plugins.json` and `.graded`) are not in it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
ARCHIVE = "archive"
PLUGINS = "plugins"

WRITERS = {
    "result.json": "evaluator",
    "source.tar.gz": "evaluator",
    "evaluator.log": "evaluator",
    "final.patch": "daemon",
    "commits.log": "daemon",
    "daemon.log": "daemon",
    "mcp.log": "mcp-server",
    "entrypoint.log": "entrypoint",
    "agent.log": "agent",
    "run.json": "runner",
}
"""Who writes each file of the run directory's top level (`agent.log` is the agent's
output, which the entrypoint relays)."""


def component(path: str) -> str:
    """The part of SSEBench (or the agent, or a plugin) that wrote `path`."""
    parts = path.split("/")
    if parts[0] == ARCHIVE:
        if len(parts) > 2 and parts[1] == PLUGINS:
            return f"plugin:{parts[2]}"
        return "agent"
    if parts[0] == PLUGINS and len(parts) > 1:
        return "plugin:" + parts[1].removesuffix(".log")
    if len(parts) == 1 and path in WRITERS:
        return WRITERS[path]
    if len(parts) == 1 and path.endswith(".log"):
        return "daemon"  # the log of one check's script run
    return "unknown"


def digest(dir_fd: int, name: str) -> tuple[int, str] | None:
    """Size and SHA-256 of a regular file, never through a link; None for anything else."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None
        return info.st_size, hashlib.file_digest(handle, "sha256").hexdigest()


def walk(top: Path, prefix: str, skip: set[str]) -> list[dict[str, object]]:
    """Every regular file below `top` (links not followed), named `prefix` + its path."""
    found: list[dict[str, object]] = []
    for folder, dirs, files, dir_fd in os.fwalk(top, follow_symlinks=False):
        relative = os.path.relpath(folder, top)
        base = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        dirs[:] = sorted(d for d in dirs if prefix + base + d not in skip)
        for name in sorted(files):
            path = prefix + base + name
            if path in skip:
                continue
            measured = digest(dir_fd, name)
            if measured is None:
                continue
            size, sha = measured
            found.append({"path": path, "size": size, "sha256": sha, "component": component(path)})
    return found


def main() -> int:
    results = Path(os.environ["SSE_RESULTS"])
    archive = Path(os.environ.get("SSE_ARCHIVE", "/tmp/sse-archive"))
    out = Path(os.environ["SSE_PLUGIN_OUT"])
    name = os.environ.get("SSE_PLUGIN_NAME", "artifact")
    own = {f"{PLUGINS}/{name}", f"{PLUGINS}/{name}.log"}
    files = walk(results, "", own)
    if not any(str(entry["path"]).startswith(ARCHIVE + "/") for entry in files):
        # The archive is a mount of its own (not inside the results directory here).
        files += walk(archive, ARCHIVE + "/", set())
    manifest = {"files": sorted(files, key=lambda entry: str(entry["path"]))}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"artifact: {len(files)} files in manifest.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
