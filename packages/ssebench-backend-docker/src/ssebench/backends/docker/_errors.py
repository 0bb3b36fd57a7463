"""The one boundary where the docker SDK's (and requests', and urllib3's) errors become SSEBench's.

Every call into the SDK runs inside `engine_errors`; no other module of this
package names an exception of those libraries. `TRANSLATIONS` is the table,
read top to bottom, the first line whose class matches deciding:

    docker.errors.ImageNotFound, BuildError, ImageLoadError -> ImageUnavailableError
    docker.errors.NotFound                                 -> PlatformNotFoundError
    requests.exceptions.HTTPError (docker's APIError)      -> PlatformRefusedError
    requests.exceptions.Timeout, urllib3 ReadTimeoutError  -> PlatformTimeoutError
    requests.exceptions.ConnectionError                    -> PlatformUnavailableError
    every other error of the three libraries               -> BackendError

One rule looks inside an exception rather than at its class: requests reports a
response body that stopped arriving in time (how `wait` on a run that outlasts
its timeout ends) as a ConnectionError around urllib3's ReadTimeoutError; that
is a timeout, not a lost engine.

An operation may promise a narrower family (`start` raises BackendError only,
`copy_from_image` its own CopyFromImageError): `family` keeps the table's class
when it belongs to that family and falls back to the family itself otherwise.
A test walks every exception class of docker.errors and requests.exceptions and
checks each line (tests/test_errors.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Final

import requests.exceptions
import urllib3.exceptions

import docker.errors
from ssebench.spec import (
    BackendError,
    ImageUnavailableError,
    PlatformNotFoundError,
    PlatformRefusedError,
    PlatformTimeoutError,
    PlatformUnavailableError,
    SSEBenchError,
)


class CopyFromImageError(BackendError, RuntimeError):
    """A file could not be copied out of an image (also RuntimeError, the seed's contract)."""


TRANSLATIONS: Final[tuple[tuple[type[BaseException], type[SSEBenchError]], ...]] = (
    (docker.errors.ImageNotFound, ImageUnavailableError),
    (docker.errors.BuildError, ImageUnavailableError),
    (docker.errors.ImageLoadError, ImageUnavailableError),
    (docker.errors.NotFound, PlatformNotFoundError),
    # docker.errors.APIError derives from it: the engine answered with an error status.
    (requests.exceptions.HTTPError, PlatformRefusedError),
    # Before ConnectionError: ConnectTimeout is both.
    (requests.exceptions.Timeout, PlatformTimeoutError),
    # Raised bare by the SDK's raw stream reads (build, pull and attach streams).
    (urllib3.exceptions.ReadTimeoutError, PlatformTimeoutError),
    (requests.exceptions.ConnectionError, PlatformUnavailableError),
    (docker.errors.DockerException, BackendError),
    # A garbled stream from the engine; it derives from RuntimeError, not DockerException.
    (docker.errors.StreamParseError, BackendError),
    (requests.exceptions.RequestException, BackendError),
    (urllib3.exceptions.HTTPError, BackendError),
    # The one urllib3 error outside its HTTPError tree (a ValueError).
    (urllib3.exceptions.ProxySchemeUnsupported, BackendError),
)
"""The SDK's exception classes and the SSEBench error each becomes, most specific first."""

ENGINE_ERRORS: Final = tuple(sdk for sdk, _ in TRANSLATIONS)
"""Every exception class the boundary translates."""


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every non-trivial secret replaced, so an engine's message can be shown."""
    for secret in secrets:
        if len(secret) >= 8:
            text = text.replace(secret, "<redacted>")
    return text


def _read_timed_out(exc: BaseException) -> bool:
    """Whether `exc` is requests' ConnectionError around a read that timed out."""
    if not isinstance(exc, requests.exceptions.ConnectionError):
        return False
    inner = [*exc.args, *(getattr(arg, "reason", None) for arg in exc.args)]
    return any(isinstance(arg, urllib3.exceptions.ReadTimeoutError) for arg in inner)


def error_class(exc: BaseException) -> type[SSEBenchError] | None:
    """The SSEBench error class for an exception of the SDK, or None for anything else."""
    if _read_timed_out(exc):
        return PlatformTimeoutError
    return next((ours for sdk, ours in TRANSLATIONS if isinstance(exc, sdk)), None)


def _detail(exc: BaseException) -> str:
    # The engine's own words ("No such container: …"), without the request's URL.
    explanation = getattr(exc, "explanation", None)
    if isinstance(exc, docker.errors.APIError) and explanation:
        return str(explanation)
    return str(exc) or type(exc).__name__


def translate(
    exc: BaseException,
    what: str,
    secrets: Iterable[str] = (),
    family: type[SSEBenchError] = SSEBenchError,
) -> SSEBenchError:
    """The SSEBench error for an exception of the SDK (see the module's table).

    Args:
        exc: what the SDK raised.
        what: the operation, for the message ("starting run r1").
        secrets: values that must not appear in the message.
        family: the error family the operation promises; the table's class is
            kept when it is one of them, else the family itself is used.

    Raises:
        TypeError: `exc` is not an exception of the SDK (a bug of the caller).
    """
    found = error_class(exc)
    if found is None:
        raise TypeError(f"{type(exc).__name__} is not an error of the docker SDK") from exc
    chosen = found if issubclass(found, family) else family
    return chosen(f"{what} failed: {redact(_detail(exc), list(secrets))}")


@contextmanager
def engine_errors(
    what: str, secrets: Iterable[str] = (), family: type[SSEBenchError] = SSEBenchError
) -> Iterator[None]:
    """Translate the SDK's errors raised inside the block (see `translate`)."""
    try:
        yield
    except ENGINE_ERRORS as exc:
        raise translate(exc, what, secrets, family) from exc
