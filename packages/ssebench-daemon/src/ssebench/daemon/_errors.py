"""The daemon's errors.

    DaemonError
    ├── ConfigError           the daemon refuses to start (bad environment, missing account)
    └── ApiError              a request cannot be answered; carries an HTTP status and a code
        ├── BadRequestError       400 malformed JSON, wrong shape, unknown action or PoC
        ├── ForbiddenError        403 withheld by the difficulty, admin only, agent phase over
        ├── NotFoundError         404 unknown route or tool, a check the task lacks, no result yet
        ├── MethodNotAllowedError 405
        ├── ConflictError         409 grading not prepared, a patch that does not apply,
        │                             a source tree its owner closed to itself
        ├── BodyTooLargeError     413 a request body over the limit
        └── InternalError         500 the daemon itself failed (a copy, git, a file it needs)

Every ApiError crosses the wire as an `ErrorResponse` `{"error", "code"}`,
never as a traceback.
"""

from __future__ import annotations

from typing import ClassVar, Literal

ErrorCode = Literal[
    "bad_request",
    "withheld",
    "admin_only",
    "agent_phase_over",
    "not_found",
    "method_not_allowed",
    "conflict",
    "patch_did_not_apply",
    "tree_unreadable",
    "diff_too_large",
    "body_too_large",
    "internal_error",
]
"""Every `code` an error answer can carry."""


class DaemonError(Exception):
    """Root of every error the daemon raises on purpose."""


class ConfigError(DaemonError):
    """The daemon cannot start as configured; the message says what to fix."""


class ApiError(DaemonError):
    """A request the daemon answers with an error status."""

    status: ClassVar[int] = 500
    default_code: ClassVar[ErrorCode] = "internal_error"

    def __init__(self, message: str, *, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code: ErrorCode = code or self.default_code


class BadRequestError(ApiError, ValueError):
    """The request is malformed or names something that does not exist in it."""

    status = 400
    default_code = "bad_request"


class ForbiddenError(ApiError, PermissionError):
    """The listener may not do this (difficulty, admin only, agent phase over)."""

    status = 403
    default_code = "withheld"


class NotFoundError(ApiError, LookupError):
    """No such route, tool or check; or the thing asked for does not exist yet."""

    status = 404
    default_code = "not_found"


class MethodNotAllowedError(ApiError):
    """The route exists but not with this method."""

    status = 405
    default_code = "method_not_allowed"


class ConflictError(ApiError):
    """The daemon's state does not allow this now (e.g. a patch that does not apply)."""

    status = 409
    default_code = "conflict"


class BodyTooLargeError(ApiError):
    """The request body is over the limit."""

    status = 413
    default_code = "body_too_large"


class InternalError(ApiError, RuntimeError):
    """The daemon failed at something that should have worked."""

    status = 500
    default_code = "internal_error"
