"""`ssebench dataset scan`: nothing of a task's hidden material reaches the agent's user.

In each agent image of a task, as uid 1000 (model): no readable file is a copy
of the hidden material (the config, the scripts, the reference patch, the
PoCs, the hidden tests; crash reports are shown to agents, so they are not
hidden), and no git object of the agent's tree nor readable file anywhere
holds what the fix or the hidden tests add, copied or reworked, counting only
added lines the agent's tree does not hold already: one of the fix's lines of
`LINE_MIN` characters or more; two of its shorter lines of `SHORT_MIN` or more
(one such line is common); a quarter of the hidden tests' lines of
`LINE_MIN` or more, two at least (a test's imports and calls are in other
tests too). The search itself runs in the image, through
`Backend.probe_image` (`SCAN_SCRIPT`: bash, find, grep, sha256sum and git,
which every tool layer has), and prints one finding a line:

- `FILE <sha256>  <path>`: a file model can read whose size is that of a hidden
  file, with its digest (compared here);
- `GIT <set> <object> <source>`: a git object of the agent's tree holding lines
  of a set (`fix`, `fix-short`, `tests`) that the tree itself does not hold;
- `LINE <set> <path>`: a file model can read holding such lines.
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
"""Shortest added line (stripped) that counts as the fix's own on its own: shorter ones
(`}`, `return -1;`) are everywhere."""

SHORT_MIN: Final = 8
"""Shortest added line looked for in pairs: a file holding two of the fix's lines of this
length or more (and under `LINE_MIN`), which the agent's tree does not hold, holds the fix."""

LINES_MAX: Final = 200
"""Added lines looked for at most, the longest first."""

SCAN_SCRIPT: Final = r"""
set -u
source_dir=$1; shift
tmp=$(mktemp -d)
if [ $# -gt 0 ]; then
  sizes=()
  for size in "$@"; do sizes+=(-o -size "${size}c"); done
  find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -readable \
    \( -false "${sizes[@]}" \) -print0 2>/dev/null \
    | xargs -0 -r sha256sum 2>/dev/null | sed 's/^/FILE /'
fi
# holds LINES FILE: how many of the lines FILE holds (each counted once).
holds() { grep -oF -f "$1" -- "$2" 2>/dev/null | sort -u | wc -l; }
# look SET LINES LEAST: where the lines of SET (base64 in LINES) that the agent's tree does
# not hold already are, LEAST of them at least in one place ("quarter": a quarter of them,
# two at least: a test's lines are imports and calls that other tests hold too).
look() {
  local set=$1 least=$3 all="$tmp/$1.all" new="$tmp/$1" object kind path
  printf '%s' "$2" | base64 -d > "$all"
  while IFS= read -r line; do
    grep -rqF --exclude-dir=.git -e "$line" "$source_dir" 2>/dev/null || printf '%s\n' "$line"
  done < "$all" > "$new"
  if [ "$least" = quarter ]; then
    least=$(( $(wc -l < "$new") / 4 )); [ "$least" -ge 2 ] || least=2
  fi
  [ "$(wc -l < "$new")" -ge "$least" ] || return 0
  if [ -d "$source_dir/.git" ]; then
    git -c safe.directory='*' -C "$source_dir" cat-file --batch-all-objects \
        --batch-check='%(objectname) %(objecttype)' 2>/dev/null \
      | while read -r object kind; do
          [ "$kind" = blob ] || continue
          git -c safe.directory='*' -C "$source_dir" cat-file blob "$object" > "$tmp/blob" \
            2>/dev/null
          [ "$(holds "$new" "$tmp/blob")" -ge "$least" ] && echo "GIT $set $object $source_dir"
        done
  fi
  find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path "$tmp" \) \
      -prune -o -type f -readable -print0 2>/dev/null \
    | xargs -0 -r grep -lF -f "$new" 2>/dev/null \
    | while IFS= read -r path; do
        [ "$(holds "$new" "$path")" -ge "$least" ] && printf 'LINE %s %s\n' "$set" "$path"
      done
}
look fix "$SCAN_FIX" 1
look fix-short "$SCAN_FIX_SHORT" 2
look tests "$SCAN_TESTS" quarter
rm -rf "$tmp"
exit 0
"""
"""The scan, run by bash as model in the image: `bash -c SCAN_SCRIPT scan <source> <size>...`,
each set of lines base64 in SCAN_FIX, SCAN_FIX_SHORT, SCAN_TESTS."""

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


def added_lines(patch: str, shortest: int = LINE_MIN, longest: int | None = None) -> list[str]:
    """The lines a unified diff adds, stripped, of `shortest` characters or more (and under
    `longest`), longest first, at most `LINES_MAX`."""
    found = {
        line[1:].strip()
        for line in patch.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    }
    lines = sorted(
        (
            line
            for line in found
            if len(line) >= shortest and (longest is None or len(line) < longest)
        ),
        key=len,
        reverse=True,
    )
    return lines[:LINES_MAX]


def _encoded(lines: list[str]) -> str:
    return base64.b64encode("".join(f"{line}\n" for line in lines).encode()).decode()


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
    folder = Path(task.folder)
    patch_name = folder_path(task.config.files.patch)
    patch = (folder / patch_name).read_text(errors="replace")
    tests_name = (
        folder_path(task.config.files.future_test) if task.config.files.future_test else None
    )
    tests = (folder / tests_name).read_text(errors="replace") if tests_name else ""
    added = {
        "fix": f"lines the fix ({patch_name}) adds",
        "fix-short": f"short lines the fix ({patch_name}) adds, two or more",
        "tests": f"lines the hidden tests ({tests_name}) add",
    }
    findings = []
    argv = ["/bin/bash", "-c", SCAN_SCRIPT, "scan", task.config.source, *map(str, sorted(sizes))]
    env = {
        "SCAN_FIX": _encoded(added_lines(patch)),
        "SCAN_FIX_SHORT": _encoded(added_lines(patch, SHORT_MIN, LINE_MIN)),
        "SCAN_TESTS": _encoded(added_lines(tests)),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }
    output = backend.probe_image(image, argv, env, timeout=SCAN_TIMEOUT)
    for row in output.decode(errors="replace").splitlines():
        kind, _, rest = row.partition(" ")
        if kind == "FILE":
            digest, _, where = rest.partition("  ")
            if digest in digests:
                what = f"a copy of {digests[digest]}, readable by model"
                findings.append(LeakFinding(image=image, path=terminal_safe(where), what=what))
            continue
        which, _, rest = rest.partition(" ")
        if which not in added:
            continue
        if kind == "GIT":
            obj, _, source = rest.partition(" ")
            where, what = f"{source}/.git object {obj}", added[which]
        elif kind == "LINE":
            where, what = rest, f"{added[which]}, readable by model"
        else:
            continue
        findings.append(LeakFinding(image=image, path=terminal_safe(where), what=what))
    return findings
