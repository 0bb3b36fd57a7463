"""Turn a case image into a tool layer: users, the graded repository, permissions.

Runs once, as root, in the tool layer's build, with the SSEBench runtime's own
Python (`/opt/ssebench/bin/python3.11 -I`), so it needs nothing from the case
image: no shell, no Python, no shadow utilities (accounts are written to
/etc/passwd, /etc/group and, where the image has them, /etc/shadow and
/etc/gshadow directly). What it makes is the container contract of docs/architecture.md:

- `model` (uid/gid 1000, no supplementary groups), created fresh: any user or
  group that had uid/gid 1000 or either name is removed, and files they owned
  are handed to root, so the agent cannot change what they held (a toolchain);
- `sse-runner`: a free system uid with a group of its own, no home, no login shell;
- the project (`source` in /ssebench/config.yaml) moved to root-only
  /ssebench-repo and copied back owned by `model`, as a fresh git repository with
  one commit (nested `.git` folders dropped), its objects packed, and no git call
  here starting an automatic gc or maintenance;
- /ssebench root's alone (folders 0700, files 0600, programs 0700): the config,
  the hidden material (reference patch, PoCs, hidden tests, reports), the scripts
  and every support file; the daemon stages what a check needs into its copy;
- /var/lib/ssebench-runner, /run/ssebench, /var/lib/ssebench/results,
  /tmp/sse-archive and model's home;
- `bash` and `git` from the runtime (/opt/ssebench/tools) linked in when the image
  has none of its own (and /bin/sh to bash when it has no shell);
- no world-writable file or folder except sticky folders (e.g. /tmp), no setuid
  or setgid bit in either copy of the project.

With a mode as its argument it serves the agent images' builds instead
(ssebench.backends.docker._agent_layer, which states the rule they enforce). An
agent image never holds the task's hidden material, in either mode: `open`
removes it from a copy of the tool layer (where a sandbox agent's Dockerfile
runs), `sidecar-agent` makes the task-independent agent base of sidecar mode (the
base image with the runtime, the users and the folders, no task at all),
`gather` collects SSEBench's own paths but /ssebench and /ssebench-repo from
either, and `seal` sweeps an agent image again once they are back.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from ssebench.spec import SSEBenchError, TaskConfig, contract, load_task_config

TOOLS = Path(contract.RUNTIME_DIR) / "tools"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MODEL = contract.MODEL_USER
MODEL_ID = contract.MODEL_UID
RUNNER = contract.RUNNER_USER
SYSTEM_IDS = range(999, 99, -1)  # like useradd --system: the highest free id first
NOLOGIN = "/usr/sbin/nologin"
RUNNER_HOME = "/nonexistent"
MODEL_HOME = Path("/home") / MODEL
COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "SSEBench",
    "GIT_AUTHOR_EMAIL": "ssebench@ssebench.invalid",
    "GIT_COMMITTER_NAME": "SSEBench",
    "GIT_COMMITTER_EMAIL": "ssebench@ssebench.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "LC_ALL": "C",
}
SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID
# Modes of the container contract (docs/architecture.md).
PRIVATE = 0o700  # root-only folders and programs (/ssebench's scripts); also model's own
HIDDEN_FILE = 0o600  # every other file under /ssebench
SCRATCH_FOLDER = 0o710  # the scratch folder: root:sse-runner, enter only
STICKY_SHARED = 0o1777  # /tmp, when the image has none


def own(path: str | Path, uid: int, gid: int, mode: int) -> None:
    """Set a path's owner and mode (chown first: it would clear setuid/setgid bits)."""
    os.chown(path, uid, gid)
    Path(path).chmod(mode)


class SetupError(Exception):
    """The case image cannot be made into a tool layer; the message says why."""


def say(message: str) -> None:
    print(f"tool layer: {message}", flush=True)


# --- accounts -----------------------------------------------------------------------------


class Table:
    """One colon-separated account file (passwd, group, shadow, gshadow), edited in memory."""

    def __init__(self, path: Path, fields: int) -> None:
        self.path = path
        self.fields = fields
        self.exists = path.is_file()
        self.rows: list[list[str]] = []
        if self.exists:
            for line in path.read_text(errors="surrogateescape").splitlines():
                if line.strip():
                    self.rows.append(line.split(":"))

    def is_entry(self, row: list[str]) -> bool:
        """Whether a row is a real entry (not a comment or an NIS `+`/`-` line)."""
        return len(row) >= self.fields and not row[0].startswith(("#", "+", "-"))

    def entries(self) -> list[list[str]]:
        return [row for row in self.rows if self.is_entry(row)]

    def names(self) -> set[str]:
        return {row[0] for row in self.entries()}

    def ids(self) -> set[int]:
        return {int(row[2]) for row in self.entries() if row[2].isdigit()}

    def drop(self, names: set[str]) -> None:
        self.rows = [row for row in self.rows if not (self.is_entry(row) and row[0] in names)]

    def drop_members(self, names: set[str], columns: tuple[int, ...]) -> None:
        for row in self.entries():
            for column in columns:
                members = [m for m in row[column].split(",") if m and m not in names]
                row[column] = ",".join(members)

    def add(self, row: list[str]) -> None:
        self.rows.append(row)

    def save(self, mode: int, group: int = 0) -> None:
        text = "".join(":".join(row) + "\n" for row in self.rows)
        if self.exists:
            info = self.path.stat()
            mode, uid, gid = stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid
        else:
            uid, gid = 0, group
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        with os.fdopen(fd, "w", errors="surrogateescape") as stream:
            stream.write(text)
        own(temporary, uid, gid, mode)
        Path(temporary).replace(self.path)


def create_accounts() -> tuple[int, set[str]]:
    """Replace any uid/gid-1000, `model` or `sse-runner` account with fresh ones.

    Returns:
        sse-runner's uid (also its gid) and the names of the users removed.
    """
    passwd = Table(Path("/etc/passwd"), 7)
    group = Table(Path("/etc/group"), 4)
    shadow = Table(Path("/etc/shadow"), 2)
    gshadow = Table(Path("/etc/gshadow"), 4)
    ours = {MODEL, RUNNER}
    gone_users = ours | {
        row[0] for row in passwd.entries() if row[2] == str(MODEL_ID) or row[0] in ours
    }
    gone_groups = ours | {row[0] for row in group.entries() if row[2] == str(MODEL_ID)}
    for name in sorted(gone_users & passwd.names()):
        say(f"removing the existing user {name}")
    passwd.drop(gone_users)
    shadow.drop(gone_users)
    group.drop(gone_groups)
    gshadow.drop(gone_groups)
    group.drop_members(gone_users, (3,))
    gshadow.drop_members(gone_users, (2, 3))

    if 0 not in passwd.ids():
        passwd.add(["root", "x" if shadow.exists else "*", "0", "0", "root", "/root", "/bin/sh"])
    if 0 not in group.ids():
        group.add(["root", "x", "0", ""])
    taken = passwd.ids() | group.ids()
    runner_id = next((i for i in SYSTEM_IDS if i not in taken), None)
    if runner_id is None:
        raise SetupError("no free system uid/gid between 100 and 999 for sse-runner")
    password = "x" if shadow.exists else "*"
    passwd.add(
        [
            MODEL,
            password,
            str(MODEL_ID),
            str(MODEL_ID),
            "SSEBench agent",
            str(MODEL_HOME),
            "/bin/bash",
        ]
    )
    passwd.add(
        [
            RUNNER,
            password,
            str(runner_id),
            str(runner_id),
            "SSEBench task scripts",
            RUNNER_HOME,
            NOLOGIN,
        ]
    )
    # "x" even without /etc/gshadow: some C libraries (busybox's) skip a group whose
    # password field is empty.
    group.add([MODEL, "x", str(MODEL_ID), ""])
    group.add([RUNNER, "x", str(runner_id), ""])
    for name in (MODEL, RUNNER):
        if shadow.exists:
            shadow.add([name, "!", "", "", "", "", "", "", ""])
        if gshadow.exists:
            gshadow.add([name, "!", "", ""])
    passwd.save(0o644)
    group.save(0o644)
    for table in (shadow, gshadow):
        if table.exists:
            table.save(0o640)
    say(f"users: {MODEL} {MODEL_ID}:{MODEL_ID}, {RUNNER} {runner_id}:{runner_id}")
    return runner_id, gone_users


def disable_sudo_rules(names: set[str]) -> None:
    """Comment out sudoers rules granted to a removed user or to model by name or uid."""
    who = {MODEL, f"#{MODEL_ID}", f"%{MODEL}", f"%#{MODEL_ID}"} | names | {f"%{n}" for n in names}
    files = [Path("/etc/sudoers")]
    if Path("/etc/sudoers.d").is_dir():
        files += sorted(p for p in Path("/etc/sudoers.d").iterdir() if p.is_file())
    for path in files:
        if not path.is_file():
            continue
        lines = path.read_text(errors="surrogateescape").splitlines(keepends=True)
        changed = False
        for index, line in enumerate(lines):
            words = line.split()
            if words and not words[0].startswith("#") and set(words[0].split(",")) & who:
                lines[index] = "# disabled by SSEBench: " + line
                changed = True
        if changed:
            say(f"disabling sudo rules of removed users in {path}")
            path.write_text("".join(lines), errors="surrogateescape")


# --- the file system ----------------------------------------------------------------------


def walk(
    top: Path, device: int, skip: frozenset[str] = frozenset()
) -> Iterator[tuple[str, os.stat_result]]:
    """Every path under `top` on `device` (top excluded) but `skip` and what is below it,
    parents before children."""
    stack = [str(top)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            if info.st_dev != device or entry.path in skip:
                continue
            yield entry.path, info
            if stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)


def sweep(keep: frozenset[str] = frozenset()) -> None:
    """Hand uid/gid-1000 files to root; drop o+w everywhere but on sticky folders and `keep`."""
    device = os.lstat("/").st_dev
    owned = writable = 0
    for path, info in walk(Path("/"), device, keep):
        if path in ("/proc", "/sys", "/dev"):
            continue
        uid, gid = info.st_uid, info.st_gid
        if MODEL_ID in (uid, gid):
            os.lchown(path, 0 if uid == MODEL_ID else uid, 0 if gid == MODEL_ID else gid)
            owned += 1
            info = os.lstat(path)
        mode = info.st_mode
        if stat.S_ISLNK(mode) or not mode & stat.S_IWOTH:
            continue
        if stat.S_ISDIR(mode) and mode & stat.S_ISVTX:
            continue
        Path(path).chmod(stat.S_IMODE(mode) & ~stat.S_IWOTH)
        writable += 1
    say(f"handed {owned} files of uid/gid {MODEL_ID} to root; removed o+w from {writable}")


def find_program(name: str) -> str | None:
    """The case image's own program `name` on its PATH (or the usual folders)."""
    for folder in [*os.environ.get("PATH", "").split(":"), *SYSTEM_PATH.split(":")]:
        candidate = Path(folder) / name
        if not folder.startswith("/") or not candidate.is_file():
            continue
        if Path(contract.RUNTIME_DIR) in candidate.resolve().parents:
            continue
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def link(path: Path, target: Path | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    path.symlink_to(target)
    say(f"linked {path} -> {target}")


def link_tools() -> str:
    """Give the image bash, git and /bin/sh; bundled ones only where it has none.

    Returns:
        The git to use.
    """
    bash = find_program("bash")
    if not Path("/bin/bash").exists():
        link(Path("/bin/bash"), bash or TOOLS / "bin" / "bash")
    if not Path("/bin/sh").exists():
        link(Path("/bin/sh"), "/bin/bash")
    git = find_program("git")
    if git is None:
        link(Path("/usr/bin/git"), TOOLS / "bin" / "git")
        for path, target in (
            (Path("/usr/lib/git-core"), TOOLS / "libexec" / "git-core"),
            (Path("/usr/share/git-core"), TOOLS / "share" / "git-core"),
        ):
            if not path.exists():
                link(path, target)
        git = "/usr/bin/git"
    return git


def copy_entry(source: Path, target: Path, info: os.stat_result) -> bool:
    """Make `target` a copy of one file, link or (empty, 0700) folder; False for anything else."""
    if stat.S_ISDIR(info.st_mode):
        target.mkdir(mode=0o700)
    elif stat.S_ISLNK(info.st_mode):
        target.symlink_to(source.readlink())
    elif stat.S_ISREG(info.st_mode):
        shutil.copyfile(source, target, follow_symlinks=False)
    else:
        say(f"leaving out {source} (not a file, folder or link)")
        return False
    return True


def settle(path: Path, info: os.stat_result, owner: tuple[int, int] | None = None) -> None:
    """Give a copy the owner, mode and times of `info`; or `owner`, and no o+w, setuid or setgid."""
    uid, gid = owner or (info.st_uid, info.st_gid)
    if stat.S_ISLNK(info.st_mode):
        os.lchown(path, uid, gid)
        return
    mode = stat.S_IMODE(info.st_mode)
    own(path, uid, gid, mode & ~stat.S_IWOTH & ~SPECIAL_BITS if owner else mode)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def copy_tree(
    source: Path, target: Path, owner: tuple[int, int] | None = None, *, skip_git: bool = False
) -> None:
    """Copy a folder's tree, times kept: as it is, or given to `owner` (see `settle`).

    Hard links become copies; sockets, FIFOs and devices are left out.
    """
    info = source.lstat()
    copy_entry(source, target, info)
    dirs: list[tuple[Path, os.stat_result]] = [(target, info)]
    for path_text, entry in walk(source, info.st_dev):
        path = Path(path_text)
        relative = path.relative_to(source)
        if skip_git and ".git" in relative.parts:
            continue
        destination = target / relative
        if not copy_entry(path, destination, entry):
            continue
        if stat.S_ISDIR(entry.st_mode):
            dirs.append((destination, entry))
        else:
            settle(destination, entry, owner)
    for folder, entry in reversed(dirs):  # a folder's time, once nothing more is added to it
        settle(folder, entry, owner)


NO_HOUSEKEEPING = ("-c", "gc.auto=0", "-c", "maintenance.auto=false")
"""Options of every git call here: an automatic gc or maintenance started as root
(a large tree's commit starts one) fails once the tree is model's and leaves
`.git/gc.log` behind, which makes every later commit there warn."""


def run_git(git: str, folder: Path, *args: str, stdin: bytes | None = None) -> bytes:
    with tempfile.TemporaryDirectory() as home:
        env = {
            "PATH": os.environ.get("PATH") or SYSTEM_PATH,
            "HOME": home,
            **COMMIT_ENV,
        }
        result = subprocess.run(
            [git, *NO_HOUSEKEEPING, *args],
            cwd=folder,
            env=env,
            input=stdin,
            capture_output=True,
            check=False,
        )
    if result.returncode != 0:
        raise SetupError(
            f"git {' '.join(args[:2])} in {folder} failed ({result.returncode}): "
            + result.stderr.decode(errors="replace").strip()
        )
    return result.stdout


def make_repositories(config: TaskConfig, git: str) -> None:
    """Move the project to /ssebench-repo; copy it back as model's one-commit repository."""
    source = Path(config.source)
    repo = Path(contract.REPO_DIR)
    if source.is_symlink() or not source.is_dir():
        raise SetupError(f"the task's source {source} is not a folder in the case image")
    if source == Path("/") or Path(contract.TASK_DIR) in (source, *source.parents):
        raise SetupError(f"the task's source {source} cannot be / or inside /ssebench")
    top_mode = stat.S_IMODE(source.stat().st_mode) & ~stat.S_IWOTH & ~SPECIAL_BITS
    if repo.is_symlink() or repo.is_file():
        repo.unlink()
    elif repo.exists():
        shutil.rmtree(repo)
    copy_tree(source, repo, (0, 0), skip_git=False)
    repo.chmod(PRIVATE)
    shutil.rmtree(source)
    copy_tree(repo, source, (0, 0), skip_git=True)
    source.chmod(top_mode)

    run_git(git, source, "-c", "init.defaultBranch=main", "init", "-q", "--template=")
    run_git(git, source, "add", "-A")
    if (repo / ".git").exists():
        # Files the original checkout tracked stay tracked, even where .gitignore says otherwise.
        tracked = run_git(git, repo, "-c", f"safe.directory={repo}", "ls-files", "-z")
        files = [
            name for name in tracked.split(b"\0") if name and (source / os.fsdecode(name)).is_file()
        ]
        if files:
            run_git(
                git,
                source,
                "update-index",
                "--add",
                "-z",
                "--stdin",
                stdin=b"\0".join(files) + b"\0",
            )
    message = f"{config.project}: the task's starting point"
    run_git(git, source, "commit", "-q", "--no-verify", "--allow-empty", "-m", message)
    # One pack instead of a loose object per file: the agent's own commits in a large
    # tree then start no automatic gc (and print nothing about one).
    run_git(git, source, "repack", "-a", "-d", "-q")
    run_git(git, source, "prune-packed", "-q")
    for path_text, _info in walk(source, source.lstat().st_dev):
        os.lchown(path_text, MODEL_ID, MODEL_ID)
    os.chown(source, MODEL_ID, MODEL_ID)
    for parent in source.parents:
        mode = stat.S_IMODE(parent.stat().st_mode)
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
    say(f"{source}: a fresh repository with one commit, owned by {MODEL}; original in {repo}")


def hidden_files(config: TaskConfig) -> set[str]:
    """Paths under /ssebench (relative) only root may read."""
    files = config.files
    named = [
        "config.yaml",
        files.patch,
        *files.poc,
        files.future_test,
        files.security_test,
        files.intent_test,
        *config.task_description.crash_report,
    ]
    return {str(PurePosixPath(os.path.normpath(path))) for path in named if path}


def lock_task_folder(config: TaskConfig) -> None:
    """Owners and modes of /ssebench (docs/architecture.md): everything root's and root's alone.

    Integrity rule enforced: hidden files are root-only until staged into a check's
    private copy. Not only the files the config names (reference patch, PoCs, hidden
    tests, reports) but the scripts and every support file: sse-runner runs a script
    from its check's own copy, made by the daemon, and cannot read /ssebench at all.
    Folders are 0700, files 0600, or 0700 where the image had any execute bit (the
    daemon keeps a script's execute bit when it stages it); links are root's.
    """
    top = Path(contract.TASK_DIR)
    hidden = hidden_files(config)
    named = (config.scripts.build, config.scripts.run, config.scripts.test)
    for name in sorted(hidden - {"config.yaml"} | {path for path in named if path}):
        if not (top / name).is_file():
            raise SetupError(f"{contract.TASK_CONFIG} names {name}, but {top / name} is missing")
    for folder_text, dirnames, filenames in os.walk(top):
        folder = Path(folder_text)
        own(folder, 0, 0, PRIVATE)
        for name in filenames + [d for d in dirnames if (folder / d).is_symlink()]:
            path = folder / name
            if path.is_symlink():
                os.lchown(path, 0, 0)
            else:
                own(path, 0, 0, PRIVATE if path.stat().st_mode & 0o111 else HIDDEN_FILE)
    say(f"{top}: root's alone ({len(hidden)} hidden files, the scripts and support files)")


def make_folder(path: Path, uid: int, gid: int, mode: int) -> None:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    path.mkdir(parents=True, exist_ok=True)
    own(path, uid, gid, mode)


def make_tmp() -> None:
    """A sticky, world-writable /tmp where the image has none (git and tempfile need one)."""
    tmp = Path("/tmp")
    if not tmp.is_dir():
        make_folder(tmp, 0, 0, STICKY_SHARED)
        say(f"made {tmp} (the image had none)")


def make_folders(runner_gid: int) -> None:
    """The runtime folders of docs/architecture.md, and model's home."""
    make_folder(Path(contract.SCRATCH_DIR), 0, runner_gid, SCRATCH_FOLDER)
    make_folder(Path(contract.SOCKET_DIR), 0, 0, PRIVATE)
    results = Path(contract.RESULTS_DIR)
    make_folder(results.parent, 0, 0, PRIVATE)
    make_folder(results, 0, 0, PRIVATE)
    make_folder(Path(contract.ARCHIVE_DIR), MODEL_ID, MODEL_ID, PRIVATE)
    if MODEL_HOME.exists() and any(MODEL_HOME.iterdir()):
        say(f"{MODEL_HOME} holds files of a removed user: they stay root's")
    else:
        make_folder(MODEL_HOME, MODEL_ID, MODEL_ID, PRIVATE)


# --- the agent layer (ssebench.backends.docker._agent_layer) --------------------------------

SEAL_DIR = Path("/ssebench-seal")
SEALED_FOLDERS = (
    contract.RUNTIME_DIR,
    contract.SCRATCH_DIR,
    contract.SOCKET_DIR,
    str(Path(contract.RESULTS_DIR).parent),
    contract.ARCHIVE_DIR,
)
"""SSEBench's folders, put back into an agent image exactly as its base has them; never
/ssebench or /ssebench-repo, which only the checker's image holds."""
SEALED_FILES = ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow")
"""The accounts, which SSEBench looks its users up in: the tool layer's, where it has them."""
NEUTRAL_FILES = ("/etc/nsswitch.conf", "/etc/ld.so.preload")
"""Files that make root's processes load libraries: the tool layer's, or empty."""
SELF = "ssebench-tool-setup.py"


def open_tool_layer() -> None:
    """The open tool layer, where an agent's Dockerfile runs: no hidden material at all."""
    for path in (contract.TASK_DIR, contract.REPO_DIR):
        shutil.rmtree(path)
    say(f"removed {contract.TASK_DIR} and {contract.REPO_DIR}")


def mirror_parents(path: Path, under: Path) -> Path:
    """Make `path`'s parent folders below `under` as the tool layer has them; `path` there."""
    for parent in reversed(path.parents[:-1]):
        target = under / parent.relative_to("/")
        if parent.is_symlink() or not parent.is_dir():
            raise SetupError(f"{parent} is not a folder in the tool layer")
        if not target.exists():
            copy_entry(parent, target, parent.lstat())
            settle(target, parent.lstat())
    return under / path.relative_to("/")


def gather_seal() -> None:
    """In a copy of an agent image's base: what the agent image gets back from it, under
    /ssebench-seal.

    `clear/` holds an empty file at the path of each of SSEBench's folders, `trees/`
    those folders, the account files and this script; every parent folder in both has
    the tool layer's owner and mode. COPYing `clear/` and then `trees/` onto an agent's
    build puts back exactly what the tool layer has there: a file replaces whatever is at
    its path (a folder with other files in it, a link), a folder then replaces that file.
    """
    clear, trees = SEAL_DIR / "clear", SEAL_DIR / "trees"
    clear.mkdir(parents=True)
    trees.mkdir()
    for name in SEALED_FOLDERS:
        mirror_parents(Path(name), clear).touch()
        copy_tree(Path(name), mirror_parents(Path(name), trees))
    for name in (*SEALED_FILES, *NEUTRAL_FILES):
        path = Path(name)
        target = mirror_parents(path, trees)
        if path.is_file() and not path.is_symlink():
            copy_entry(path, target, path.lstat())
            settle(target, path.lstat())
        elif name in NEUTRAL_FILES:
            target.touch()
            own(target, 0, 0, 0o644)
    shutil.copyfile(__file__, trees / SELF)
    own(trees / SELF, 0, 0, PRIVATE)
    say(f"{SEAL_DIR}: {len(SEALED_FOLDERS)} folders and the account files, for agent images")


def seal_agent_image() -> None:
    """In an agent image, with SSEBench's paths back: the tool layer's sweep again.

    The agent's Dockerfile ran as root: model must get no more from it than the base
    gave (no file of uid/gid 1000 outside model's own places, nothing world-writable
    but sticky folders). /ssebench and /ssebench-repo must not exist in the agent
    container (they live only in the checker): whatever the agent's build put there
    goes. Model's own places are its home and the archive; the source tree is a
    volume the checker fills at run time, so nothing of the image is kept for it.
    """
    for name in (contract.TASK_DIR, contract.REPO_DIR):
        path = Path(name)
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
    if MODEL_HOME.is_symlink() or not MODEL_HOME.is_dir():
        raise SetupError(f"the agent's build replaced {MODEL_HOME}, which must stay a folder")
    sweep(frozenset(str(place) for place in (MODEL_HOME, Path(contract.ARCHIVE_DIR))))
    record_agent_command(os.environ.get("AGENT_COMMAND", ""))


def record_agent_command(text: str) -> None:
    """Write the agent's command (`AGENT_COMMAND`: the agent stage's CMD, a JSON list of
    strings) where the launcher reads it (`contract.AGENT_COMMAND_FILE`), root's, 0644."""
    try:
        command = json.loads(text)
    except ValueError:
        command = None
    if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
        raise SetupError(f"AGENT_COMMAND must be the agent's CMD as a JSON list, not {text!r}")
    path = Path(contract.AGENT_COMMAND_FILE)
    path.write_text(json.dumps(command))
    own(path, 0, 0, 0o644)


def make_sidecar_agent_base() -> None:
    """The sidecar agent base: the users, tools and folders of a tool layer, no task."""
    make_tmp()
    runner_id, gone = create_accounts()
    disable_sudo_rules(gone - {MODEL, RUNNER})
    sweep()
    link_tools()
    make_folders(runner_id)


def make_tool_layer() -> None:
    """The tool layer of the case image this runs in (see the module)."""
    config = load_task_config(Path(contract.TASK_CONFIG))
    make_tmp()
    runner_id, gone = create_accounts()
    disable_sudo_rules(gone - {MODEL, RUNNER})
    sweep()
    git = link_tools()
    make_repositories(config, git)
    lock_task_folder(config)
    make_folders(runner_id)


MODES = {
    "tool": make_tool_layer,
    "open": open_tool_layer,
    "sidecar-agent": make_sidecar_agent_base,
    "gather": gather_seal,
    "seal": seal_agent_image,
}


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "tool"
    try:
        if mode not in MODES:
            raise SetupError(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
        MODES[mode]()
    except (SetupError, SSEBenchError) as exc:
        print(f"tool layer: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        Path(__file__).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
