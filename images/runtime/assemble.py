"""Assemble /opt/ssebench in the runtime image's builder stage (see notes/portable-runtime.md).

Runs with the builder's own Debian python3.11. It copies that interpreter, its
standard library and every shared library they load (the dynamic loader and libc
included) under /opt/ssebench, and points the interpreter's ELF header at the
bundled loader with a DT_RPATH, so it runs in any Linux image of the same
architecture. `git` and `bash` are bundled the same way under
/opt/ssebench/tools, for case images that lack them, with `tar`, `sleep` and `touch`:
what a Kubernetes run's helper containers run (the keeper, the copy-out, the kill
file), so that they run SSEBench's own programs, never an image's.

Run without arguments once /opt/ssebench is to be made, and with
`--package-libraries` once our packages are in its dist-packages.

Layout:
    /opt/ssebench/bin/python3.11          the interpreter (python3, python: links)
    /opt/ssebench/lib/                    its loader and libraries
    /opt/ssebench/lib/python3.11/         the standard library
    /opt/ssebench/lib/python3/dist-packages/  our packages (the next build step)
    /opt/ssebench/tools/bin/{bash,git,tar,sleep,touch}    bundled tools
    /opt/ssebench/tools/lib/              their loader and libraries
    /opt/ssebench/tools/libexec/git-core  git's exec path (builtins and helpers)
    /opt/ssebench/tools/share/git-core/templates
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

RUNTIME = Path("/opt/ssebench")
PYTHON = "python3.11"
LOADER = "ld-linux-x86-64.so.2"
# glibc loads this one with dlopen (thread cancellation, pthread_exit), so ldd never lists it.
DLOPENED = ("libgcc_s.so.1",)
# Debian's python3.11 has its site module frozen in: it looks for packages in
# <prefix>/lib/python3/dist-packages (never site-packages), so ours go there.
SITE_PACKAGES = RUNTIME / "lib" / "python3" / "dist-packages"
TOOLS = RUNTIME / "tools"
HELPERS = ("tar", "sleep", "touch")
"""Programs of Kubernetes' helper containers (`contract.RUNTIME_TOOLS`)."""
GIT_CORE = Path("/usr/lib/git-core")
GIT_TEMPLATES = Path("/usr/share/git-core/templates")
LDD_LINE = re.compile(r"^\s*(?:\S+\s+=>\s+)?(/\S+)\s+\(0x[0-9a-f]+\)$")


def say(message: str) -> None:
    print(f"assemble: {message}", flush=True)


def is_elf(path: Path) -> bool:
    with path.open("rb") as stream:
        return stream.read(4) == b"\x7fELF"


def libraries(binaries: list[Path]) -> set[Path]:
    """Every shared library the binaries load, the loader included (resolved paths)."""
    found: set[Path] = set()
    for binary in binaries:
        output = subprocess.run(
            ["ldd", str(binary)], check=True, capture_output=True, text=True
        ).stdout
        for line in output.splitlines():
            match = LDD_LINE.match(line)
            if match:
                found.add(Path(match.group(1)))
    return found


def copy_libraries(found: set[Path], target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for library in sorted(found):
        shutil.copy2(library.resolve(), target / library.name)
    for name in DLOPENED:
        source = Path("/lib/x86_64-linux-gnu") / name
        shutil.copy2(source.resolve(), target / name)
    if not (target / LOADER).is_file():
        sys.exit(f"assemble: {LOADER} was not among the libraries of {target}")


def patch(binary: Path, libdir: Path) -> None:
    subprocess.run(
        [
            "patchelf",
            "--set-interpreter",
            str(libdir / LOADER),
            "--force-rpath",
            "--set-rpath",
            str(libdir),
            str(binary),
        ],
        check=True,
    )


def assemble_python() -> None:
    say(f"{PYTHON} and its standard library")
    bindir = RUNTIME / "bin"
    bindir.mkdir(parents=True)
    python = bindir / PYTHON
    shutil.copy2(f"/usr/bin/{PYTHON}", python)
    for alias in ("python3", "python"):
        (bindir / alias).symlink_to(PYTHON)
    stdlib = RUNTIME / "lib" / PYTHON
    shutil.copytree(
        f"/usr/lib/{PYTHON}",
        stdlib,
        symlinks=True,
        ignore=shutil.ignore_patterns("site-packages", "dist-packages", "sitecustomize.py"),
    )
    SITE_PACKAGES.mkdir(parents=True)
    modules = sorted((stdlib / "lib-dynload").glob("*.so"))
    say(f"libraries of {PYTHON} and {len(modules)} extension modules")
    copy_libraries(libraries([python, *modules]), RUNTIME / "lib")
    patch(python, RUNTIME / "lib")


def assemble_tools() -> None:
    say(f"bash, git and {', '.join(HELPERS)}")
    bindir, libdir = TOOLS / "bin", TOOLS / "lib"
    bindir.mkdir(parents=True)
    shutil.copy2("/bin/bash", bindir / "bash")
    for tool in HELPERS:
        shutil.copy2(f"/bin/{tool}", bindir / tool)
    git_core = TOOLS / "libexec" / "git-core"
    shutil.copytree(GIT_CORE, git_core, symlinks=True)
    shutil.copytree(GIT_TEMPLATES, TOOLS / "share" / "git-core" / "templates")
    (bindir / "git").symlink_to("../libexec/git-core/git")
    needed = libraries([bindir / "bash", git_core / "git", *(bindir / h for h in HELPERS)])
    # Helpers that need more than git itself (the network transports: curl, TLS, ...)
    # are left out: runs have no network to use them with.
    for helper in sorted(git_core.iterdir()):
        if helper.is_symlink() or not helper.is_file() or not is_elf(helper):
            continue
        if helper.name != "git" and not libraries([helper]) <= needed:
            say(f"leaving out {helper.name} (needs libraries beyond git's)")
            helper.unlink()
    for link in git_core.iterdir():
        if link.is_symlink() and not link.exists():
            link.unlink()
    copy_libraries(needed, libdir)
    for binary in [bindir / "bash", *(bindir / h for h in HELPERS), *git_core.iterdir()]:
        if not binary.is_symlink() and binary.is_file() and is_elf(binary):
            patch(binary, libdir)


def add_package_libraries() -> None:
    """Bundle the system libraries our packages' extension modules link against.

    manylinux wheels expect some of glibc's libraries (libpthread, libdl, librt,
    libstdc++ ...) from the system; the image they run in may have none.
    Libraries a wheel vendors itself (`<name>.libs/`) are found there already.
    """
    modules = sorted(path for path in SITE_PACKAGES.rglob("*.so*") if is_elf(path))
    libdir = RUNTIME / "lib"
    missing = {
        library
        for library in libraries(modules)
        if SITE_PACKAGES not in library.parents and not (libdir / library.name).exists()
    }
    say(f"{len(modules)} extension modules in dist-packages need {len(missing)} more libraries")
    for library in sorted(missing):
        say(f"adding {library.name}")
        shutil.copy2(library.resolve(), libdir / library.name)


def main() -> None:
    if sys.argv[1:] == ["--package-libraries"]:
        add_package_libraries()
        return
    if RUNTIME.exists():
        sys.exit(f"assemble: {RUNTIME} exists already")
    assemble_python()
    assemble_tools()
    # Root's, read-only to everyone else (the package trees copied in later are too).
    for path in [RUNTIME, *RUNTIME.rglob("*")]:
        if not path.is_symlink():
            os.chown(path, 0, 0)
            executable = path.is_dir() or path.stat().st_mode & 0o100
            path.chmod(0o755 if executable else 0o644)
    say("done")


if __name__ == "__main__":
    main()
