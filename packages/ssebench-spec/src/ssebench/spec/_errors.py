"""Errors of SSEBench's public interface.

    SSEBenchError
    ├── UserError                 bad input or set-up the user can fix
    │   ├── TaskConfigError       a task's config.yaml (or agent.yaml, dataset.yaml) is invalid
    │   ├── ImageUnavailableError an image cannot be built, pulled or found
    │   ├── UnknownBackendError   no usable backend under that name
    │   └── UnknownToolLayerError no usable tool layer under that name
    ├── BackendError              a run cannot be started, watched or reached
    │   ├── RunTimeoutError       waiting for a run took longer than allowed (also TimeoutError)
    │   ├── PlatformTimeoutError  the platform did not answer in time (also TimeoutError)
    │   ├── PlatformUnavailableError  the platform cannot be reached (also ConnectionError)
    │   └── PlatformRefusedError  the platform answered and refused the request
    │       └── PlatformNotFoundError  it has no such object: run, network, file (also LookupError)
    └── DecodeError               a message or file does not match its type (also ValueError)

Messages never contain a run's environment values. A backend turns its
platform's own errors into the most specific of these at one boundary (the
Docker backend's `_errors.py`); nothing of the platform's library escapes it.
"""

from __future__ import annotations


class SSEBenchError(Exception):
    """Root of every error SSEBench raises on purpose."""


class UserError(SSEBenchError):
    """Something the user asked for or set up is wrong; the message says what is allowed."""


class TaskConfigError(UserError):
    """A task's (or agent's, or dataset's) YAML file does not match its schema."""


class ImageUnavailableError(UserError):
    """An image of the run cannot be built, pulled or found."""


class UnknownBackendError(UserError):
    """No usable backend is installed under the requested name."""


class UnknownToolLayerError(UserError):
    """No usable tool layer is installed under the requested name."""


class BackendError(SSEBenchError):
    """A backend cannot start, watch, stop or reach a run."""


class RunTimeoutError(BackendError, TimeoutError):
    """A run did not finish within the time the caller allowed."""


class PlatformTimeoutError(BackendError, TimeoutError):
    """The platform (an engine, a cluster's API) did not answer within the time allowed."""


class PlatformUnavailableError(BackendError, ConnectionError):
    """The platform cannot be reached, or the connection to it broke."""


class PlatformRefusedError(BackendError):
    """The platform answered and refused the request; the message carries its reason."""


class PlatformNotFoundError(PlatformRefusedError, LookupError):
    """The platform has no such object (a container, a network, a file in an image)."""


class DecodeError(SSEBenchError, ValueError):
    """A message or file does not match the type it should have."""
