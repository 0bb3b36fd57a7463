"""Grading against a hostile agent in real tool-image containers: the agent's git
configuration starts nothing, and deep trees never turn a check into a 500."""

from __future__ import annotations

import time

import pytest

from .boxes import bash, bencher, get, post
from .conftest import StartBox

pytestmark = pytest.mark.docker

RESULTS = "/var/lib/ssebench/results"

PROMISOR_TRAP = r"""
set -e
# A commit with a new tree: the starting commit's objects are packed, a new tree is loose.
echo agent > agent-note.txt
git add agent-note.txt
git -c user.name=a -c user.email=a@a commit -q -m "agent commit"
tree=$(git rev-parse 'HEAD^{tree}')
git config core.repositoryformatversion 1
git config extensions.partialClone origin
git config remote.origin.url "$PWD"
git config remote.origin.promisor true
git config remote.origin.uploadpack "sh -c 'touch /tmp/lazy-fetch-ran; \
setsid sh -c \"while :; do date >> /tmp/survivor; sleep 0.1; done\" </dev/null >/dev/null 2>&1 & \
exit 1'"
rm -f ".git/objects/${tree:0:2}/${tree:2}"
# Armed: git log on this repository as its owner runs the command.
git log --all --name-status >/dev/null 2>&1 || true
test -e /tmp/lazy-fetch-ran && echo armed
rm -f /tmp/lazy-fetch-ran
"""


def test_a_promisor_remote_in_the_agents_repository_runs_nothing_during_grading(
    daemon_in: StartBox,
) -> None:
    box = daemon_in("tlvkit-heap-overflow")
    armed = box.ok(bash("agent", PROMISOR_TRAP))
    assert armed["stdout"] == "armed\n", armed
    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True
    box.sh("rm -f /tmp/survivor")  # written by the arming run, killed with the agent phase
    assert box.ok(post("admin", "/prepare_grading"))["success"] is True
    time.sleep(0.5)
    assert box.sh("test -e /tmp/lazy-fetch-ran").returncode != 0, "the lazy fetch ran"
    assert box.sh("test -e /tmp/survivor").returncode != 0, "a survivor writes"
    assert box.processes("model") == []
    commits = box.out(f"cat {RESULTS}/commits.log")
    assert "git log failed" in commits, commits


DEEP = r"""
deep() {  # $1/d/d/…/d/deep.txt, 1500 folders down (mkdir -p walks relatively: fast)
  local path="$1/$(printf 'd/%.0s' $(seq 1500))"
  mkdir -p "$path" && echo bottom > "${path}deep.txt"
}
"""

DEEP_HOOK = "\nimport subprocess as _hook\n_hook.run(['bash', './deep.sh'], check=False)\n"
"""Appended to pyarchive/__init__.py: its build and tests import the package."""

DEEP_SCRIPT = f"""#!/bin/bash
{DEEP}
mkdir -p /tmp/runner-deep && deep /tmp/runner-deep
mkdir -p built-deep && deep built-deep
chmod 0 built-deep/d/d
echo made deep trees
"""


def test_trees_1500_folders_deep_are_graded_and_cleaned_up_never_a_500(
    daemon_in: StartBox,
) -> None:
    box = daemon_in("pyarchive-path-traversal", SSE_DIFFICULTY="0")
    made = box.ok(
        bash(
            "agent",
            f"{DEEP}\nmkdir agent-deep && deep agent-deep && "
            f"cat > deep.sh <<'SSE_END'\n{DEEP_SCRIPT}SSE_END\n"
            f"cat >> pyarchive/__init__.py <<'SSE_END'\n{DEEP_HOOK}SSE_END\n"
            "echo ok",
        )
    )
    assert made["stdout"] == "ok\n", made
    built = box.ok(bencher("agent", "build"))
    assert built["code"] == 0 and "made deep trees" in built["stdout"], built
    assert box.processes("sse-runner") == []
    assert box.sh("test -e /tmp/runner-deep").returncode != 0, "the sweep left it"
    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True
    assert box.ok(post("admin", "/prepare_grading"))["success"] is True
    deep_file = "agent-deep/" + "d/" * 1500 + "deep.txt"
    assert box.out(f"cat /ssebench-repo/{deep_file}") == "bottom\n"
    graded = box.ok(bencher("admin", "build", grading=True))
    assert graded["code"] == 0 and "made deep trees" in graded["stdout"], graded
    assert box.ok(bencher("admin", "function_test", grading=True))["code"] == 0
    assert box.sh("test -e /tmp/runner-deep").returncode != 0
    leftovers = box.out("ls /var/lib/ssebench-runner").split()
    assert len(leftovers) <= 1, leftovers  # at most the last build's copy, for the PoCs


IMAGE_GIT_RECORDER = r"""
set -e
mv /usr/bin/git /usr/bin/git.image
cat > /usr/bin/git <<'SCRIPT'
#!/bin/sh
echo "$(id -u) $*" >> /srv/image-git-callers
exec /usr/bin/git.image "$@"
SCRIPT
chmod 755 /usr/bin/git
mkdir -p /srv && touch /srv/image-git-callers && chmod 666 /srv/image-git-callers
"""
"""The record is out of /tmp, where the daemon's sweeps remove what model and sse-runner
wrote during a check or the agent phase."""


def test_the_daemon_runs_the_runtimes_git_never_the_images(daemon_in: StartBox) -> None:
    """Root (and sse-runner in a check) run the sealed runtime's git by its absolute path:
    an image's git that records its callers sees only the agent's own call (uid 1000)."""
    box = daemon_in("pyarchive-path-traversal", SSE_DIFFICULTY="0")
    box.sh(IMAGE_GIT_RECORDER).check_returncode()
    fix = "printf '\\n# touched\\n' >> pyarchive/_archive.py && git status --short"
    assert box.ok(bash("agent", fix))["stdout"] == " M pyarchive/_archive.py\n"
    assert "+# touched" in box.ok(get("agent", "/diff"))["diff"]
    intent = box.ok(bencher("agent", "intent_test"))  # applies the diff and the hidden tests
    assert "does not apply" not in intent["stderr"], intent
    assert box.ok(post("admin", "/admin/agent_exited"))["success"] is True
    assert box.ok(post("admin", "/prepare_grading"))["success"] is True
    assert "+# touched" in box.out(f"cat {RESULTS}/final.patch")

    callers = box.out("cat /srv/image-git-callers").splitlines()
    assert callers == ["1000 status --short"], callers
