"""build_layer reads the classic builder's log: steps, cache use, progress and failures.

A fake engine replays logs recorded from Docker 20.10, so these run without one;
test_layers.py builds real images.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from ssebench.backends.docker import BuildLine, build_layer
from ssebench.backends.docker._build import inputs_digest
from ssebench.spec import ImageUnavailableError

CACHED_BUILD = [
    {"stream": "Step 1/5 : ARG SSEBENCH_BASE_IMAGE"},
    {"stream": "\n"},
    {"stream": "Step 2/5 : FROM ${SSEBENCH_BASE_IMAGE}"},
    {"stream": "\n"},
    {"stream": " ---> cb4224e6d5a5\n"},
    {"stream": "Step 3/5 : ARG SSEBENCH_REGISTRY"},
    {"stream": "\n"},
    {"stream": " ---> Using cache\n"},
    {"stream": " ---> a7a79760a771\n"},
    {"stream": "Step 4/5 : COPY src/ /src/tlvkit/"},
    {"stream": "\n ---> Using cache\n ---> 81d233a154bb\n"},
    {"stream": "Step 5/5 : WORKDIR /src/tlvkit\n"},
    {"stream": " ---> Using cache\n"},
    {"stream": " ---> 42b59e12266f\n"},
    {"aux": {"ID": "sha256:42b59e12266facdfd8ae5772a192286888ed1da4c1e1a88395275a972734d641"}},
    {"stream": "Successfully built 42b59e12266f\n"},
    {"stream": "Successfully tagged ssebench/case/demo/tlvkit:1\n"},
]

PARTLY_CACHED_BUILD = [
    {"stream": "Step 1/4 : FROM debian:bookworm-slim\n ---> cb4224e6d5a5\n"},
    {"stream": "Step 2/4 : RUN apt-get update\n ---> Using cache\n ---> 2650b9f11700\n"},
    {"stream": "Step 3/4 : COPY setup.py /tmp/setup.py\n ---> 514ca2d4a72c\n"},
    {"stream": "Step 4/4 : RUN python3 /tmp/setup.py\n ---> Running in c5edf9a5027b\n"},
    {"stream": "setting up\n"},
    {"stream": "Removing intermediate container c5edf9a5027b\n ---> cb927592e4e1\n"},
    {"aux": {"ID": "sha256:cb927592e4e1"}},
    {"stream": "Successfully built cb927592e4e1\n"},
]

FAILED_BUILD = [
    {"stream": "Step 1/3 : FROM debian:bookworm-slim\n ---> cb4224e6d5a5\n"},
    {"stream": "Step 2/3 : RUN echo ok\n ---> Using cache\n ---> 2650b9f11700\n"},
    {"stream": "Step 3/3 : RUN make -C /src all\n ---> Running in 0f48d2328ae3\n"},
    {"stream": "cc -c tlv.c\n"},
    {"stream": "\x1b[91mtlv.c:3: error: expected ';'\n\x1b[0m"},
    {
        "errorDetail": {"code": 2, "message": "The command '/bin/sh -c make' returned 2"},
        "error": "The command '/bin/sh -c make -C /src all' returned a non-zero code: 2",
    },
]


class FakeAPI:
    def __init__(self, chunks: list[dict[str, Any]] | Exception) -> None:
        self.chunks = chunks
        self.options: dict[str, Any] = {}

    def build(self, **options: Any) -> Iterator[dict[str, Any]]:
        self.options = options
        if isinstance(self.chunks, Exception):
            raise self.chunks
        return iter(self.chunks)


class FakeClient:
    def __init__(self, chunks: list[dict[str, Any]] | Exception) -> None:
        self.api = FakeAPI(chunks)


def build(chunks: list[dict[str, Any]] | Exception, **kwargs: Any) -> Any:
    client = FakeClient(chunks)
    kwargs.setdefault("context", Path("/nonexistent"))
    result = build_layer(client, layer="case", tag="ssebench/case/demo/t:1", **kwargs)  # type: ignore[arg-type]
    return result, client.api.options


def test_a_build_served_entirely_by_the_cache_reports_no_rebuilt_step() -> None:
    image, _ = build(CACHED_BUILD)
    assert image.image_id.startswith("sha256:42b59e12266f")
    assert [step.number for step in image.steps] == [1, 2, 3, 4, 5]
    assert image.rebuilt == ()
    assert image.cached


def test_steps_that_ran_are_told_apart_from_cached_ones() -> None:
    image, _ = build(PARTLY_CACHED_BUILD)
    assert [step.instruction for step in image.rebuilt] == [
        "COPY setup.py /tmp/setup.py",
        "RUN python3 /tmp/setup.py",
    ]
    assert not image.cached


def test_every_log_line_reaches_progress_with_step_lines_marked() -> None:
    lines: list[BuildLine] = []
    build(PARTLY_CACHED_BUILD, progress=lines.append)
    started = [line.text for line in lines if line.step is not None and not line.step.cached]
    assert started[0] == "Step 1/4 : FROM debian:bookworm-slim"
    assert "setting up" in [line.text for line in lines]
    assert {line.layer for line in lines} == {"case"}


def test_a_failing_step_is_named_with_its_layer_and_the_end_of_its_output() -> None:
    with pytest.raises(ImageUnavailableError) as raised:
        build(FAILED_BUILD)
    message = str(raised.value)
    assert message.startswith(
        "case layer (ssebench/case/demo/t:1) failed at step 3/3 (RUN make -C /src all): "
        "The command '/bin/sh -c make -C /src all' returned a non-zero code: 2"
    )
    assert "tlv.c:3: error: expected ';'" in message
    assert "\x1b" not in message, "the engine's terminal colours are left out"
    assert "Step 2/3" not in message


def test_a_build_the_engine_refuses_names_the_layer() -> None:
    refused = docker.errors.APIError("400", explanation="Cannot locate specified Dockerfile: X")
    with pytest.raises(
        ImageUnavailableError,
        match=r"^case layer .* before its first step: sending the build failed: Cannot locate",
    ):
        build(refused)


def test_a_stream_without_an_image_is_a_failure() -> None:
    with pytest.raises(ImageUnavailableError, match="reported no image"):
        build([{"stream": "Step 1/1 : FROM scratch\n"}])


def test_nothing_is_pulled_and_a_tar_context_is_sent_as_is() -> None:
    context = io.BytesIO(b"tar")
    _, options = build(CACHED_BUILD, context=context, nocache=True, buildargs={"A": "1"})
    assert options["pull"] is False
    assert options["fileobj"] is context and options["custom_context"] is True
    assert options["nocache"] is True and options["buildargs"] == {"A": "1"}
    _, options = build(CACHED_BUILD, context=Path("/some/folder"))
    assert options["path"] == "/some/folder" and "fileobj" not in options


# -- reuse by inputs ---------------------------------------------------------------------


class FakeImage:
    def __init__(self, image_id: str, labels: dict[str, str]) -> None:
        self.id = image_id
        self.labels = labels


class FakeImages:
    def __init__(self) -> None:
        self.tagged: dict[str, FakeImage] = {}

    def get(self, name: str) -> FakeImage:
        if name not in self.tagged:
            raise docker.errors.ImageNotFound(name)
        return self.tagged[name]


class EngineWithImages(FakeClient):
    """Builds replay CACHED_BUILD and tag its image with the labels asked for."""

    def __init__(self) -> None:
        super().__init__(CACHED_BUILD)
        self.images = FakeImages()
        self.builds = 0

    def layer(self, **kwargs: Any) -> Any:
        kwargs.setdefault("context", Path("/nonexistent"))
        before = self.api.options
        result = build_layer(self, layer="case", tag="ssebench/case/demo/t:1", **kwargs)  # type: ignore[arg-type]
        if self.api.options is not before:
            self.builds += 1
            self.images.tagged[result.tag] = FakeImage(result.image_id, self.api.options["labels"])
        self.api.options = {}
        return result


def test_a_layer_built_from_the_same_inputs_is_reused_without_a_build() -> None:
    engine = EngineWithImages()
    first = engine.layer(inputs="parent-id", buildargs={"A": "1"})
    lines: list[BuildLine] = []
    again = engine.layer(inputs="parent-id", buildargs={"A": "1"}, progress=lines.append)
    assert engine.builds == 1
    assert again.image_id == first.image_id and again.cached and again.steps == ()
    assert [line.reused for line in lines] == [True]
    assert lines[0].text == "ssebench/case/demo/t:1 is up to date: its inputs have not changed"


@pytest.mark.parametrize(
    "change",
    [
        {"inputs": "another-parent-id"},
        {"buildargs": {"A": "2"}},
        {"labels": {"extra": "label"}},
        {"dockerfile": "Other.Dockerfile"},
        {"nocache": True},
    ],
)
def test_a_change_of_inputs_or_options_or_force_sends_the_build(change: dict[str, Any]) -> None:
    engine = EngineWithImages()
    engine.layer(inputs="parent-id", buildargs={"A": "1"})
    engine.layer(**{"inputs": "parent-id", "buildargs": {"A": "1"}, **change})
    assert engine.builds == 2


def test_an_image_without_the_inputs_label_is_built_over() -> None:
    engine = EngineWithImages()
    engine.images.tagged["ssebench/case/demo/t:1"] = FakeImage("sha256:old", {})
    image = engine.layer(inputs="parent-id")
    assert engine.builds == 1 and image.image_id != "sha256:old"


def test_a_tar_context_is_made_only_when_a_build_is_sent() -> None:
    engine = EngineWithImages()
    made: list[io.BytesIO] = []

    @contextlib.contextmanager
    def context() -> Iterator[io.BytesIO]:
        made.append(io.BytesIO(b"tar"))
        yield made[-1]

    engine.layer(inputs="parent-id", context=context)
    engine.layer(inputs="parent-id", context=context)
    assert len(made) == 1 and engine.builds == 1


def test_the_inputs_digest_follows_names_modes_contents_and_links(tmp_path: Path) -> None:
    folder = tmp_path / "context"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "file.txt").write_text("one\n")
    (folder / "run.sh").write_text("#!/bin/sh\n")
    (folder / "link").symlink_to("sub/file.txt")
    (folder / "__pycache__").mkdir()
    first = inputs_digest(["parent"], folder)
    assert inputs_digest(["parent"], folder) == first
    (folder / "__pycache__" / "x.pyc").write_bytes(b"ignored")
    assert inputs_digest(["parent"], folder) == first
    assert inputs_digest(["other parent"], folder) != first
    changes = [
        lambda: (folder / "sub" / "file.txt").write_text("two\n"),
        lambda: (folder / "run.sh").chmod(0o755),
        lambda: ((folder / "link").unlink(), (folder / "link").symlink_to("run.sh")),
        lambda: (folder / "sub" / "new").mkdir(),
        lambda: (folder / "sub" / "file.txt").rename(folder / "sub" / "renamed.txt"),
    ]
    seen = {first}
    for change in changes:
        change()
        digest = inputs_digest(["parent"], folder)
        assert digest not in seen
        seen.add(digest)


class SlowEngine(EngineWithImages):
    """The engine tags the image as its build ends, as Docker does; each build waits for
    `release` first, so two callers are sure to overlap."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.sent = 0
        engine = self

        class SlowAPI(FakeAPI):
            def build(self, **options: Any) -> Iterator[dict[str, Any]]:
                engine.sent += 1

                def stream() -> Iterator[dict[str, Any]]:
                    assert engine.release.wait(30)
                    yield from CACHED_BUILD
                    engine.images.tagged[options["tag"]] = FakeImage(
                        "sha256:42b59e12266f", options["labels"]
                    )

                return stream()

        self.api = SlowAPI(CACHED_BUILD)


def test_two_processes_building_one_layer_at_once_send_one_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second waits for the first (a lock in the cache folder), then reuses its image."""
    monkeypatch.setenv("SSEBENCH_CACHE_DIR", str(tmp_path))
    engine = SlowEngine()
    results: list[Any] = []

    def layer() -> None:
        results.append(
            build_layer(  # type: ignore[arg-type]
                engine, layer="case", tag="ssebench/case/demo/t:1", context=Path("/x"), inputs="p"
            )
        )

    threads = [threading.Thread(target=layer) for _ in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(0.3)
    assert engine.sent == 1, "the second builder sent a build while the first was building"
    engine.release.set()
    for thread in threads:
        thread.join(30)
    assert engine.sent == 1
    assert sorted(len(r.steps) for r in results) == [0, 5]  # one built, one reused
