"""The errors a client of the daemon sees (the entrypoint, the evaluator, the MCP server).

    DaemonError                      root of the package's errors (ssebench.daemon._errors)
    ├── DaemonConnectionError        the connection failed or broke (also ConnectionError)
    │   └── DaemonUnreachableError   nothing answers on the socket
    ├── DaemonTimeoutError           no complete answer in time (also TimeoutError)
    ├── DaemonProtocolError          a 200 whose body is not the route's response (also ValueError)
    └── DaemonRefusedError           an error status; its `code` picks the class:
        ├── DaemonBadRequestError          bad_request (also ValueError)
        ├── DaemonForbiddenError           403 (also PermissionError)
        │   ├── DaemonWithheldError            withheld
        │   ├── DaemonAdminOnlyError           admin_only
        │   └── DaemonAgentPhaseOverError      agent_phase_over
        ├── DaemonNotFoundError            not_found (also LookupError)
        ├── DaemonMethodNotAllowedError    method_not_allowed
        ├── DaemonConflictError            conflict
        │   ├── DaemonPatchDidNotApplyError    patch_did_not_apply
        │   ├── DaemonTreeUnreadableError      tree_unreadable
        │   └── DaemonDiffTooLargeError        diff_too_large
        ├── DaemonBodyTooLargeError        body_too_large
        └── DaemonInternalError            internal_error (also RuntimeError)

`refusal` is the one place an answer's code becomes a class: `REFUSALS` has a
line for every `ErrorCode` (a test walks the set); a code this client does not
know (a newer daemon) or an answer without one gives DaemonRefusedError itself.
Standard library only: the entrypoint imports this during the agent phase.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, ClassVar, Final, get_args

from ssebench.daemon._errors import DaemonError, ErrorCode

if TYPE_CHECKING:
    from ssebench.daemon._client._http import Reply


class DaemonConnectionError(DaemonError, ConnectionError):
    """The connection to the daemon failed, broke mid-answer, or did not carry HTTP."""


class DaemonUnreachableError(DaemonConnectionError):
    """Nothing answers on the socket (no daemon, or it died); the message says which socket."""


class DaemonTimeoutError(DaemonError, TimeoutError):
    """The daemon's whole answer did not arrive within the time the caller allowed."""


class DaemonProtocolError(DaemonError, ValueError):
    """The daemon answered 200 with a body that is not the route's response."""


class DaemonRefusedError(DaemonError):
    """The daemon answered with an error status; `status`, `code` and `detail` say which."""

    code_of_class: ClassVar[ErrorCode | None] = None
    """The code this class stands for (None: the base, for codes this client does not know)."""

    def __init__(self, what: str, reply: Reply) -> None:
        self.status = reply.status
        self.code = error_code(reply)
        self.detail = reply.error_text()
        super().__init__(f"{what}: the daemon answered {reply.status}: {self.detail}")


class DaemonBadRequestError(DaemonRefusedError, ValueError):
    """The request was malformed or named something that does not exist (400)."""

    code_of_class = "bad_request"


class DaemonForbiddenError(DaemonRefusedError, PermissionError):
    """The caller may not do this (403); the subclass says why."""


class DaemonWithheldError(DaemonForbiddenError):
    """The task's difficulty withholds this from the agent."""

    code_of_class = "withheld"


class DaemonAdminOnlyError(DaemonForbiddenError):
    """Only the admin socket may ask this."""

    code_of_class = "admin_only"


class DaemonAgentPhaseOverError(DaemonForbiddenError):
    """The agent's phase has ended; the agent's socket may no longer act."""

    code_of_class = "agent_phase_over"


class DaemonNotFoundError(DaemonRefusedError, LookupError):
    """No such route, tool or check, or nothing to give yet (404)."""

    code_of_class = "not_found"


class DaemonMethodNotAllowedError(DaemonRefusedError):
    """The route exists, not with this method (405)."""

    code_of_class = "method_not_allowed"


class DaemonConflictError(DaemonRefusedError):
    """The daemon's state does not allow this now (409)."""

    code_of_class: ClassVar[ErrorCode | None] = "conflict"


class DaemonPatchDidNotApplyError(DaemonConflictError):
    """The agent's diff does not apply to the pristine tree."""

    code_of_class = "patch_did_not_apply"


class DaemonTreeUnreadableError(DaemonConflictError):
    """The agent's tree cannot be read as its owner (the agent closed it to itself)."""

    code_of_class = "tree_unreadable"


class DaemonDiffTooLargeError(DaemonConflictError):
    """The agent's diff is larger than the daemon holds (graded `failed`)."""

    code_of_class = "diff_too_large"


class DaemonBodyTooLargeError(DaemonRefusedError):
    """The request's body was over the daemon's limit (413)."""

    code_of_class = "body_too_large"


class DaemonInternalError(DaemonRefusedError, RuntimeError):
    """The daemon failed at something that should have worked (500)."""

    code_of_class = "internal_error"


REFUSALS: Final[dict[ErrorCode, type[DaemonRefusedError]]] = {
    "bad_request": DaemonBadRequestError,
    "withheld": DaemonWithheldError,
    "admin_only": DaemonAdminOnlyError,
    "agent_phase_over": DaemonAgentPhaseOverError,
    "not_found": DaemonNotFoundError,
    "method_not_allowed": DaemonMethodNotAllowedError,
    "conflict": DaemonConflictError,
    "patch_did_not_apply": DaemonPatchDidNotApplyError,
    "tree_unreadable": DaemonTreeUnreadableError,
    "diff_too_large": DaemonDiffTooLargeError,
    "body_too_large": DaemonBodyTooLargeError,
    "internal_error": DaemonInternalError,
}
"""The class of each code an error answer can carry."""

_CODES: Final = frozenset(get_args(ErrorCode))


def error_code(reply: Reply) -> ErrorCode | None:
    """The `code` of an error answer (`{"error", "code"}`), if it is one the daemon defines."""
    try:
        data = json.loads(reply.body)
    except ValueError:
        return None
    code = data.get("code") if isinstance(data, dict) else None
    return code if code in _CODES else None


def refusal(what: str, reply: Reply) -> DaemonRefusedError:
    """The error for an answer with an error status, its class chosen by the answer's code.

    Args:
        what: the call, for the message ("prepare_grading").
        reply: the daemon's answer.
    """
    code = error_code(reply)
    cls = REFUSALS.get(code, DaemonRefusedError) if code is not None else DaemonRefusedError
    return cls(what, reply)
