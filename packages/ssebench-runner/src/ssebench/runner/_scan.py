"""`ssebench dataset scan`: nothing of a task's hidden material reaches the agent's user.

In each agent image of a task, as uid 1000 (model): no readable file is a copy
of the hidden material (the config, the scripts, the reference patch, the
PoCs, the hidden tests; crash reports are shown to agents, so they are not
hidden), no git object of the agent's tree holds a line the fix adds, and no
readable file anywhere holds one (a file a layer left behind). The search
itself runs in the image, through `Backend.probe_image` (`SCAN_SCRIPT`: bash,
find, grep, sha256sum and git, which every tool layer has), and prints one
finding a line:

- `FILE <sha256>  <path>`: a file model can read whose size is that of a hidden
  file, with its digest (compared here);
- `GIT <object> <source>`: a git object of the agent's tree holding a line the
  fix adds that the tree itself does not hold;
- `LINE <path>`: a file model can read holding such a line.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any, Final

from ssebench.spec import Backend, Message, Task
from ssebench.spec._task_check import folder_path
from ssebench.spec.terminal import terminal_safe

LINE_MIN: Final = 16
"""Shortest added line (stripped) that counts as the fix's own: shorter ones (`}`,
`return -1;`) are everywhere."""

LINES_MAX: Final = 200
"""Added lines looked for at most, the longest first."""

SCAN_SCRIPT: Final = r"""
set -u
source_dir=$1; shift
lines=$(mktemp); new=$(mktemp)
printf '%s' "$SCAN_LINES" | base64 -d > "$lines"
if [ $# -gt 0 ]; then
  sizes=()
  for size in "$@"; do sizes+=(-o -size "${size}c"); done
  find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -readable \
    \( -false "${sizes[@]}" \) -print0 2>/dev/null \
    | xargs -0 -r sha256sum 2>/dev/null | sed 's/^/FILE /'
fi
# The fix's lines the agent's tree does not hold already are what would give it away.
while IFS= read -r line; do
  grep -rqF --exclude-dir=.git -e "$line" "$source_dir" 2>/dev/null || printf '%s\n' "$line"
done < "$lines" > "$new"
if [ -s "$new" ]; then
  if [ -d "$source_dir/.git" ]; then
    git -c safe.directory='*' -C "$source_dir" cat-file --batch-all-objects \
        --batch-check='%(objectname) %(objecttype)' 2>/dev/null \
      | while read -r object kind; do
          [ "$kind" = blob ] || continue
          git -c safe.directory='*' -C "$source_dir" cat-file blob "$object" 2>/dev/null \
            | grep -qF -f "$new" && echo "GIT $object $source_dir"
        done
  fi
  find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path "$lines" -o -path "$new" \) \
      -prune -o -type f -readable -print0 2>/dev/null \
    | xargs -0 -r grep -lF -f "$new" 2>/dev/null | sed 's/^/LINE /'
fi
rm -f "$lines" "$new"
exit 0
"""
"""The scan, run by bash as model in the image: `bash -c SCAN_SCRIPT scan <source> <size>...`,
the added lines base64 in SCAN_LINES."""

SCAN_TIMEOUT: Final = 600
"""Seconds one image's scan may take."""


class LeakFinding(Message, kw_only=True, frozen=True):
    """One place in an agent image where model can read hidden material."""

    image: str
    path: str
    """Where in the image (a file, or `<source>/.git` object <id>)."""
    what: str
    """What it leaks, by the task folder's own paths."""


def hidden_files(task: Task) -> dict[str, Path]:
    """The task's hidden files on the host, by the task folder's own paths."""
    config = task.config
    named = [
        "config.yaml",
        *(path for path in (config.scripts.build, config.scripts.run, config.scripts.test) if path),
        config.files.patch,
        *config.files.poc,
        *([config.files.future_test] if config.files.future_test else []),
    ]
    folder = Path(task.folder)
    return {folder_path(path): folder / folder_path(path) for path in named}


def added_lines(patch: str) -> list[str]:
    """The distinctive lines a unified diff adds, stripped, longest first."""
    found = {
        line[1:].strip()
        for line in patch.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    }
    lines = sorted((line for line in found if len(line) >= LINE_MIN), key=len, reverse=True)
    return lines[:LINES_MAX]


def scan_task(backend: Backend[Any], task: Task, image: str) -> list[LeakFinding]:
    """Every leak of `task`'s hidden material in `image`, each with its path.

    Raises:
        OSError: a hidden file cannot be read on the host.
        SSEBenchError: the image cannot be found, or the backend cannot look inside it.
    """
    digests: dict[str, str] = {}
    sizes: set[int] = set()
    for name, path in hidden_files(task).items():
        data = path.read_bytes()
        if data:
            digests.setdefault(hashlib.sha256(data).hexdigest(), name)
            sizes.add(len(data))
    patch = (Path(task.folder) / folder_path(task.config.files.patch)).read_text(errors="replace")
    lines = added_lines(patch)
    encoded = base64.b64encode("".join(f"{line}\n" for line in lines).encode()).decode()
    findings = []
    argv = ["/bin/bash", "-c", SCAN_SCRIPT, "scan", task.config.source, *map(str, sorted(sizes))]
    env = {"SCAN_LINES": encoded, "PATH": "/usr/local/bin:/usr/bin:/bin"}
    output = backend.probe_image(image, argv, env, timeout=SCAN_TIMEOUT)
    for row in output.decode(errors="replace").splitlines():
        kind, _, rest = row.partition(" ")
        if kind == "FILE":
            digest, _, where = rest.partition("  ")
            if digest in digests:
                what = f"a copy of {digests[digest]}, readable by model"
                findings.append(LeakFinding(image=image, path=terminal_safe(where), what=what))
        elif kind == "GIT":
            obj, _, source = rest.partition(" ")
            findings.append(
                LeakFinding(
                    image=image,
                    path=terminal_safe(f"{source}/.git object {obj}"),
                    what=f"lines the fix ({folder_path(task.config.files.patch)}) adds",
                )
            )
        elif kind == "LINE":
            findings.append(
                LeakFinding(
                    image=image,
                    path=terminal_safe(rest),
                    what=f"lines the fix ({folder_path(task.config.files.patch)}) adds, "
                    "readable by model",
                )
            )
    return findings
