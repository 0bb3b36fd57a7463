"""Resolving a Dockerfile's FROM images the way the builder does, before a build is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ssebench.backends.docker._from_images import (
    MissingFromImageError,
    require_from_images,
    substitute,
)
from ssebench.spec import ImageUnavailableError


def test_build_arguments_are_substituted_in_every_form() -> None:
    values = {"A": "x", "EMPTY": ""}
    assert substitute("$A/${A}:${A:-d}", values) == "x/x:x"
    assert substitute("${EMPTY:-d}/${NONE:-d}/${A:+set}/${NONE:+set}", values) == "d/d/set/"


class Images:
    """The engine's image store, as much of it as the check uses."""

    def __init__(self, present: set[str]) -> None:
        self.present = present
        self.asked: list[str] = []

    def get(self, name: str) -> object:
        import docker.errors

        self.asked.append(name)
        if name not in self.present:
            raise docker.errors.ImageNotFound(f"No such image: {name}")
        return object()


class Client:
    def __init__(self, present: set[str]) -> None:
        self.images = Images(present)


def check(tmp_path: Path, text: str, present: set[str], **buildargs: str) -> Client:
    (tmp_path / "Dockerfile").write_text(text)
    client = Client(present)
    engine: Any = client
    require_from_images(
        engine, layer="case", dockerfile=tmp_path / "Dockerfile", buildargs=buildargs
    )
    return client


def test_stages_scratch_and_present_images_pass_and_each_image_is_looked_up(
    tmp_path: Path,
) -> None:
    text = "ARG BASE=base:1\nFROM ${BASE} AS tools\nFROM tools\nFROM scratch\nFROM $OTHER\n"
    client = check(tmp_path, text, {"base:2", "other:1"}, BASE="base:2", OTHER="other:1")
    assert client.images.asked == ["base:2", "other:1"]


def test_a_missing_image_names_the_line_and_the_way_to_a_base(tmp_path: Path) -> None:
    with pytest.raises(MissingFromImageError) as raised:
        check(tmp_path, "# old\nARG X=registry.example/base:1\nFROM ${X}\n", set())
    message = str(raised.value)
    assert isinstance(raised.value, ImageUnavailableError)
    assert message.startswith(
        "case layer: Dockerfile line 3: FROM registry.example/base:1 is not on this machine"
    )
    assert "SSEBENCH_BASE_IMAGE" in message and "\n" not in message


def test_a_from_that_resolves_to_nothing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MissingFromImageError, match=r"FROM \$\{UNSET\} \(empty\)"):
        check(tmp_path, "FROM ${UNSET}\n", set())
