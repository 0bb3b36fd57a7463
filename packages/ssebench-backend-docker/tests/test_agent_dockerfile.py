"""An agent's Dockerfile names no image but its base: checked before anything is built.

The refused files below are the ways a Dockerfile can reach another image through
the classic builder (a second FROM, `COPY --from`, ONBUILD) spelled the ways the
engine's parser accepts them: any case, quotes and escapes inside a flag, line
continuations across comments and blank lines, parser directives. Several were
tried on the engine (Docker 20.10.24): it honours `--"fr"om=`, reads
`# escape=`` after `# syntax=`, and does not continue a line ending in `\\\\`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ssebench.backends.docker._agent_dockerfile import (
    ALLOWED,
    AgentDockerfileError,
    check_agent_dockerfile,
    check_dockerfile_text,
)
from ssebench.backends.docker._prepare import prepare_run_images
from ssebench.spec import (
    Agent,
    ImageRequest,
    ImageUnavailableError,
    default_dataset,
    find_home,
    find_task,
    list_agents,
)

HOME = find_home(Path(__file__).resolve().parent)


def check(text: str) -> None:
    check_dockerfile_text(text, agent="probe", path="/agents/probe/Dockerfile")


def refusal(text: str) -> str:
    with pytest.raises(AgentDockerfileError) as raised:
        check(text)
    return str(raised.value)


ACCEPTED = {
    "plain": 'ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCMD ["/bin/true"]\n',
    "dollar form, stage name, lower case": "arg TOOL_IMAGE\nfrom $TOOL_IMAGE as agent\n",
    "default value, comments, BOM, CRLF": (
        "\ufeff# the agent\r\nARG TOOL_IMAGE=ignored\r\n\r\n# base\r\nFROM ${TOOL_IMAGE}\r\n"
    ),
    "every allowed instruction": (
        "# syntax=docker/dockerfile:1\n"
        "ARG TOOL_IMAGE\n"
        "FROM ${TOOL_IMAGE} AS base\n"
        "ARG VERSION=1\n"
        "ENV A=1 B=2\n"
        "LABEL org.example.agent=yes\n"
        "MAINTAINER someone\n"
        "WORKDIR /opt/agent\n"
        "USER root\n"
        'SHELL ["/bin/bash", "-c"]\n'
        "COPY --chown=0:0 run.sh /opt/agent/run.sh\n"
        'ADD ["notes.tar", "/opt/agent/"]\n'
        "RUN apt-get update \\\n"
        "    # a comment inside the continuation\n"
        "\n"
        "    && apt-get install -y jq\n"
        "EXPOSE 8080\n"
        "STOPSIGNAL SIGTERM\n"
        'CMD ["/bin/bash", "/opt/agent/run.sh"]\n'
    ),
    "backtick escape directive": (
        "# escape=`\nARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nRUN echo a `\n    && echo b\n"
    ),
    "FROM continued into RUN across a comment (the engine runs `echo FROM case`)": (
        "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nRUN echo \\\n#\\\nFROM case\n"
    ),
    "a path that merely contains from": (
        "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY from/ /opt/from/\n"
    ),
}


@pytest.mark.parametrize("text", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_a_dockerfile_on_its_given_base_is_accepted(text: str) -> None:
    check(text)


REFUSED = {
    "a second FROM": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nFROM ssebench/case/demo/t:1\n", 3),
    "a second FROM of the base": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nFROM ${TOOL_IMAGE}\n", 3),
    "another base": ("FROM ssebench/case/demo/t:1\n", 1),
    "a default standing in for the base": ("ARG X=ssebench/case/demo/t:1\nFROM ${X}\n", 1),
    "the base with a default inline": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE:-case}\n", 2),
    "the base in quotes": ('ARG TOOL_IMAGE\nFROM "${TOOL_IMAGE}"\n', 2),
    "the base with a platform": ("ARG TOOL_IMAGE\nFROM --platform=linux/amd64 ${TOOL_IMAGE}\n", 2),
    "the base with extra words": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE} x y z\n", 2),
    "no FROM": ("ARG TOOL_IMAGE\n# nothing else\n", 1),
    "an empty file": ("", 1),
    "COPY --from a stage": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY --from=0 / /x\n", 3),
    "COPY --from an image": (
        "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY --from=ssebench/case/demo/t:1 /ssebench /x\n",
        3,
    ),
    "copy --from in lower case after --chown": (
        "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\ncopy --chown=0:0 --from=case / /x\n",
        3,
    ),
    "ADD --from": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nADD --from=case /a /b\n", 3),
    "a quoted flag name": ('ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY --"fr"om=case / /x\n', 3),
    "an escaped flag name": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY --fr\\om=case / /x\n", 3),
    "a flag name in upper case": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY --FROM=case / /x\n", 3),
    "--from split over continued lines": (
        "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY \\\n  # hidden\n\n  --from=case \\\n  / /x\n",
        3,
    ),
    "a continuation that a backtick escape directive cancels": (
        "# escape=`\nARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nRUN echo \\\nFROM case\n",
        5,
    ),
    "an escape directive after syntax, which newer parsers honour": (
        "# syntax=docker/dockerfile:1\n# escape=`\nARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\n"
        "RUN echo \\\nFROM case\n",
        6,
    ),
    "an escaped escape at the end, which newer Dockers do not continue": (
        "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nRUN echo a\\\\\nFROM case\n",
        4,
    ),
    "ONBUILD": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nONBUILD COPY --from=case / /x\n", 3),
    "onbuild in lower case": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nonbuild RUN true\n", 3),
    "HEALTHCHECK": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nHEALTHCHECK CMD cat /ssebench/x\n", 3),
    "VOLUME": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nVOLUME /ssebench\n", 3),
    "ENTRYPOINT": ('ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nENTRYPOINT ["/bin/sh"]\n', 3),
    "an unknown instruction": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nFETCH case\n", 3),
    "a heredoc, whose lines the classic builder reads as instructions": (
        "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nRUN <<EOF\necho hi\nEOF\n",
        4,
    ),
    "a flag on RUN": (
        "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nRUN --mount=from=case,target=/x ls\n",
        3,
    ),
    "another flag on COPY": ("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY --link a /b\n", 3),
    "another ARG before FROM": ("ARG TOOL_IMAGE\nARG OTHER\nFROM ${TOOL_IMAGE}\n", 2),
    "an instruction before FROM": ("ARG TOOL_IMAGE\nRUN true\nFROM ${TOOL_IMAGE}\n", 2),
    "an invalid escape directive": ("# escape=x\nARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\n", 1),
    "two escape directives": (
        "# escape=`\n# escape=\\\nARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\n",
        2,
    ),
}


@pytest.mark.parametrize(("text", "line"), REFUSED.values(), ids=REFUSED.keys())
def test_a_dockerfile_that_could_reach_another_image_is_refused_naming_the_line(
    text: str, line: int
) -> None:
    message = refusal(text)
    assert message.startswith(f"agent probe: /agents/probe/Dockerfile line {line}: "), message
    assert message.endswith(ALLOWED)
    assert "\n" not in message


def test_the_refusal_quotes_the_instruction_and_says_why() -> None:
    message = refusal("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY --from=case /ssebench /x\n")
    assert "line 3: `COPY --from=case /ssebench /x` names another image (--from)" in message
    message = refusal("ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nHEALTHCHECK CMD id\n")
    assert "`HEALTHCHECK CMD id`: the engine would run its command as root" in message
    long = "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nFROM " + "x" * 500 + "\x1b[31m\n"
    message = refusal(long)
    assert len(message) < 500 and "\x1b" not in message


def test_the_refusal_is_an_image_error_the_runner_prints_as_one_line() -> None:
    assert issubclass(AgentDockerfileError, ImageUnavailableError)


def test_the_agents_shipped_with_ssebench_and_the_test_agents_are_accepted_but_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSEBENCH_AGENT_PATH", str(HOME / "tests" / "agents"))
    agents = {agent.name: agent for agent in list_agents(HOME)}
    for name in ("reference", "dummy", "sleeper", "broken-build"):
        check_agent_dockerfile(agents[name])
    with pytest.raises(AgentDockerfileError, match="line 4: `COPY --from=ssebench/case/"):
        check_agent_dockerfile(agents["names-case-image"])


def test_an_agent_without_a_dockerfile_is_refused(tmp_path: Path) -> None:
    agent = Agent(name="empty", version="1", uses_model=False, folder=str(tmp_path))
    with pytest.raises(AgentDockerfileError, match=r"^agent empty: cannot read .*Dockerfile"):
        check_agent_dockerfile(agent)


class Untouchable:
    """An engine client that fails the test when anything uses it."""

    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"the engine was used ({name}) before the Dockerfile was checked")


def test_a_run_whose_agent_dockerfile_is_refused_builds_nothing(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "ARG TOOL_IMAGE\nFROM ${TOOL_IMAGE}\nCOPY --from=ssebench/case/demo/x:1 / /x\n"
    )
    agent = Agent(name="sneaky", version="1", uses_model=False, folder=str(tmp_path))
    task = find_task(default_dataset(HOME), "pyarchive-path-traversal")
    request = ImageRequest(mode="sandbox", task=task, agent=agent)
    with pytest.raises(AgentDockerfileError, match=r"^agent sneaky: .*Dockerfile line 3: `COPY"):
        prepare_run_images(Untouchable(), request)  # type: ignore[arg-type]
