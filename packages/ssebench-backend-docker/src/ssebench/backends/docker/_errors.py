"""The one boundary where the docker SDK's (and requests') errors become SSEBench's.

docker.errors.ImageNotFound, BuildError, ImageLoadError  -> ImageUnavailableError
docker.errors.NotFound                                  -> RunNotFoundError
every other docker.errors / requests error              -> BackendError
(a read time-out while waiting                          -> RunTimeoutError, by the caller)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import requests.exceptions

import docker.errors
from ssebench.spec import BackendError, ImageUnavailableError


class RunNotFoundError(BackendError, LookupError):
    """The engine has no such container, network or volume."""


class CopyFromImageError(BackendError, RuntimeError):
    """A file could not be copied out of an image."""


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every non-trivial secret replaced, so an engine's message can be shown."""
    for secret in secrets:
        if len(secret) >= 8:
            text = text.replace(secret, "<redacted>")
    return text


def translate(
    exc: BaseException, what: str, secrets: Iterable[str] = ()
) -> BackendError | ImageUnavailableError:
    """The SSEBench error for an exception of the docker SDK or of requests.

    Args:
        exc: what the SDK raised.
        what: the operation, for the message ("starting run r1").
        secrets: values that must not appear in the message.
    """
    detail = redact(str(exc) or type(exc).__name__, list(secrets))
    message = f"{what} failed: {detail}"
    unavailable = (
        docker.errors.ImageNotFound | docker.errors.BuildError | docker.errors.ImageLoadError
    )
    if isinstance(exc, unavailable):
        return ImageUnavailableError(message)
    if isinstance(exc, docker.errors.NotFound):
        return RunNotFoundError(message)
    return BackendError(message)


ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
"""Everything the SDK raises when the engine refuses or cannot be reached."""


@contextmanager
def engine_errors(what: str, secrets: Iterable[str] = ()) -> Iterator[None]:
    """Translate the SDK's errors raised inside the block (see the module's table)."""
    try:
        yield
    except ENGINE_ERRORS as exc:
        raise translate(exc, what, secrets) from exc
    except docker.errors.StreamParseError as exc:
        raise translate(exc, what, secrets) from exc
