"""Fakes for the privileged parts, and a small task laid out like a tool image.

On the host every "user" is the test's own user; processes started for the
daemon carry an environment tag, and `TagKiller` kills by that tag instead of
by uid (killing by uid would kill the test runner itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path

from ssebench.daemon import DaemonConfig, Identity, Privileges
from ssebench.daemon._users import current_identity

TAG = "SSEBENCH_TEST_TAG"


def tagged(tag: str) -> list[int]:
    """Live processes whose environment carries `TAG=tag`."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
            state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X") and needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


class TagKiller:
    """Implements `ProcessKiller` by environment tag: every tagged process dies."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.calls: list[str] = []

    async def kill_all(self, who: Identity) -> int:
        self.calls.append(who.name)
        seen = 0
        for _ in range(500):
            alive = tagged(self.tag)
            if not alive:
                return seen
            seen = max(seen, len(alive))
            for pid in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.01)
        raise RuntimeError("tagged processes survive")


def fake_privileges() -> Privileges:
    """Everything as the test's user, killed by tag."""
    tag = uuid.uuid4().hex
    me = current_identity()
    return Privileges(
        model=me, runner=me, killer=TagKiller(tag), extra_env={TAG: tag}, sweep_dirs=()
    )


CONFIG = """\
id: fake-task
project: fakeproj
repository: https://example.invalid/secret-repository.git
language: shell
source: {source}
task_description:
  issue: lib.txt says bug
  crash_report:
    - reports/crash.txt
  bug_description: the library is buggy
scripts:
  build: scripts/build.sh
  run: scripts/run.sh
  test: scripts/test.sh
files:
  patch: diffs/patch.diff
  poc:
    - pocs/first.txt
    - pocs/second.txt
  future_test: diffs/test.diff
trigger_commit: SECRET-TRIGGER
patch_commit: SECRET-PATCH
reference:
  - https://example.invalid/SECRET-REFERENCE
"""

BUILD = """\
#!/bin/bash
set -e
cp lib.txt built.txt
echo "built $(cat built.txt)"
"""

RUN = """\
#!/bin/bash
[ -f built.txt ] || { echo "not built" >&2; exit 2; }
if grep -q fixed built.txt; then exit 0; fi
echo "triggered by $(cat "$1")" >&2
exit 1
"""

TEST = """\
#!/bin/bash
status=0
for t in tests/*.sh; do bash "$t" || { echo "FAIL $t"; status=1; }; done
echo "tests done"
exit $status
"""

PATCH = """\
diff --git a/lib.txt b/lib.txt
--- a/lib.txt
+++ b/lib.txt
@@ -1 +1 @@
-bug
+fixed
"""

TEST_DIFF = """\
diff --git a/tests/intent.sh b/tests/intent.sh
new file mode 100644
--- /dev/null
+++ b/tests/intent.sh
@@ -0,0 +1 @@
+grep -q fixed lib.txt
"""


def _git(cwd: Path, *args: str) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@dataclass
class FakeTask:
    """A task laid out like a tool image, under temporary directories."""

    root: Path
    config: DaemonConfig
    source: Path


def make_project(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "lib.txt").write_text("bug\n")
    (path / "tests").mkdir()
    (path / "tests" / "basic.sh").write_text("test -f lib.txt\n")
    (path / "README").write_text("a fake project\n")


def make_task(root: Path, sockets: Path, **overrides: object) -> FakeTask:
    """Lay out a task: /ssebench, /ssebench-repo and the source tree as a one-commit repo."""
    task_dir, repo, source = root / "ssebench", root / "repo", root / "source"
    for sub in ("scripts", "pocs", "diffs", "reports"):
        (task_dir / sub).mkdir(parents=True)
    (task_dir / "config.yaml").write_text(CONFIG.format(source=source))
    for name, text in (("build", BUILD), ("run", RUN), ("test", TEST)):
        script = task_dir / "scripts" / f"{name}.sh"
        script.write_text(text)
        script.chmod(0o755)
    (task_dir / "pocs" / "first.txt").write_text("POC-ONE\n")
    (task_dir / "pocs" / "second.txt").write_text("POC-TWO\n")
    (task_dir / "diffs" / "patch.diff").write_text(PATCH)
    (task_dir / "diffs" / "test.diff").write_text(TEST_DIFF)
    (task_dir / "reports" / "crash.txt").write_text("CRASH REPORT TEXT\n")
    make_project(repo)
    make_project(source)
    _git(source, "init", "-q", "-b", "main")
    _git(source, "add", "-A")
    _git(source, "commit", "-q", "-m", "initial")
    settings: dict[str, object] = {
        "difficulty": 0,
        "check_timeout": 30.0,
        "agent_socket": sockets / "sse.sock",
        "admin_socket": sockets / "run" / "admin.sock",
        "http_host": "127.0.0.1",
        "http_port": None,
        "results_dir": root / "results",
        "archive_dir": root / "archive",
        "task_dir": task_dir,
        "task_config": task_dir / "config.yaml",
        "repo_dir": repo,
        "scratch_dir": root / "scratch",
        "state_dir": root / "state",
    }
    settings.update(overrides)
    (root / "archive").mkdir()
    return FakeTask(root=root, config=DaemonConfig(**settings), source=source)  # type: ignore[arg-type]


def write_script(path: Path, text: str) -> None:
    path.write_text(textwrap.dedent(text))
    path.chmod(0o755)
