"""Issue 13, hole 7: agent layers are built as root on top of the hidden material.

Rule (docs/integrity.md): an agent's Dockerfile never runs where hidden material is, and
names no image but its given base (one `FROM ${TOOL_IMAGE}`, no `COPY --from=`);
otherwise `ssebench run` refuses it with one clear line.
"""

from __future__ import annotations

import docker
import pytest

from .conftest import PYARCHIVE, Hidden, Runs

pytestmark = [pytest.mark.integrity, pytest.mark.timeout(900)]


def test_an_agent_layer_build_never_sees_the_hidden_material(
    runs: Runs, hidden: dict[str, Hidden]
) -> None:
    """Hole 7: the `layer-leak` agent's Dockerfile does
    `RUN cat /ssebench/diffs/patch.diff > /opt/agent/leak` and its command prints the
    leak: nothing of the reference patch reaches the agent, and the run still works.
    Rule: an agent's Dockerfile never runs where hidden material is."""
    done = runs.run(PYARCHIVE, "layer-leak", difficulty=4)

    assert done.returncode == 0, done.why()
    assert done.grade()["status"] == "failed", done.why()
    secret = hidden[PYARCHIVE]
    assert secret.leaks_in(done.log("agent.log").encode()) == []
    assert secret.leaks_under(done.archive) == {}
    assert secret.leaks_in(done.stderr) == []


@pytest.mark.parametrize("agent", ["second-from", "copy-from"])
def test_an_agent_layer_naming_another_image_is_refused(
    agent: str, runs: Runs, tool_image: object, docker_client: docker.DockerClient
) -> None:
    """Hole 7: an agent whose Dockerfile has a second FROM (`second-from`) or a
    `COPY --from=` of the case image (`copy-from`) is refused: `ssebench run` exits 1
    with one clear line and makes no run directory. Rule: an agent's Dockerfile names
    no image but its given base."""
    from ssebench.backends.docker import case_image_name
    from ssebench.spec import default_dataset, find_home, find_task

    # copy-from names the case image: it must be local, or the builder would pull.
    task = find_task(default_dataset(find_home()), PYARCHIVE)
    tool_image(PYARCHIVE)  # type: ignore[operator]
    docker_client.images.get(case_image_name(task))

    done = runs.run(PYARCHIVE, agent, difficulty=4)

    assert done.returncode == 1, done.why()
    errors = [line for line in done.stderr.decode().splitlines() if line.startswith("ssebench: ")]
    assert len(errors) == 1, done.stderr.decode()[-2000:]
    assert not done.run_dir.parent.exists(), done.why()
