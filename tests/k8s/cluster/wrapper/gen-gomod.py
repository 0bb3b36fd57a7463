#!/usr/bin/env python3
"""Regenerate go.mod of the wrapper module for one Kubernetes release.

k8s.io/kubernetes requires its staging modules (k8s.io/api, ...) at v0.0.0 and
replaces them with ./staging/src/...; replace directives of a dependency are
ignored, so this main module replaces each with its published v0.MINOR.PATCH.

Usage: GOMODCACHE=... gen-gomod.py v1.35.4   (then: go mod tidy)
"""

import json
import re
import subprocess
import sys
from pathlib import Path

kver = sys.argv[1]
sver = "v0." + kver.removeprefix("v1.")
info = json.loads(
    subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{kver}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
)
gomod = re.sub(r"//[^\n]*", "", Path(info["GoMod"]).read_text())
godir = re.search(r"^go (\S+)", gomod, re.M).group(1)
godebug = re.findall(r"^godebug (?:\([^)]*\)|[^\n]*)", gomod, re.M)
reps = []
for lhs, rhs in re.findall(
    r"^[ \t]*(?:replace[ \t]+)?(\S+(?:[ \t]+v\S+)?)[ \t]*=>[ \t]*(\S+(?:[ \t]+\S+)?)[ \t]*$",
    gomod,
    re.M,
):
    path = lhs.split()[0]
    if rhs.startswith("./staging/"):
        reps.append(f"\t{path} => {path} {sver}")
    elif not rhs.startswith("."):
        reps.append(f"\t{lhs} => {rhs}")
Path("go.mod").write_text(
    "module ssebench.local/k8sbuild\n\n"
    f"go {godir}\n\n" + "\n".join(godebug) + "\n\n"
    f"require k8s.io/kubernetes {kver}\n\n"
    "replace (\n" + "\n".join(sorted(reps)) + "\n)\n"
)
