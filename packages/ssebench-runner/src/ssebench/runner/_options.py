"""Checking `ssebench run`'s options, each failure one line that names what is allowed."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from typing import Final, get_args

from ssebench.spec import Egress, Mode, UserError, contract, settings

RUN_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""What a run ID may look like: it becomes a folder name, a label value and part of names."""

RESERVED_RUN_ID: Final = "latest"
"""The name of the link to the newest run, so never a run ID."""

NO_MODEL: Final = "none"
"""The model of a run whose agent uses none; a folder of the run directory's path."""

OFFERED_MODES: Final[tuple[Mode, ...]] = ("sandbox", "sidecar")
"""The modes `--mode` offers: only those this runner can carry out."""

EGRESS_ENV: Final = settings.EGRESS.name
"""Environment variable giving `--egress` its default."""


def validate_run_id(run_id: str) -> str:
    """Return `run_id` if it can name a run.

    Args:
        run_id: the value of `--run-id`.

    Returns:
        The same run ID.

    Raises:
        UserError: it is empty, longer than 64 characters, starts with something
            other than a letter or digit, has other characters than letters,
            digits, '.', '_' and '-', or is `latest`.
    """
    if run_id == RESERVED_RUN_ID or RUN_ID_PATTERN.fullmatch(run_id) is None:
        raise UserError(
            f"invalid run ID {run_id!r}: use 1-64 letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit, and not {RESERVED_RUN_ID!r}"
        )
    return run_id


def new_run_id(now: datetime) -> str:
    """A fresh run ID: the UTC time to the millisecond, then random hex.

    IDs made at different milliseconds sort in the order they were made; the
    random part keeps two runs started at once apart.

    Args:
        now: the run's start time (timezone-aware).

    Returns:
        An ID like `20250102T030405.678Z-1a2b3c4d`.
    """
    utc = now.astimezone(UTC)
    stamp = utc.strftime("%Y%m%dT%H%M%S") + f".{utc.microsecond // 1000:03d}Z"
    return f"{stamp}-{secrets.token_hex(4)}"


def validate_difficulty(difficulty: int) -> int:
    """Return `difficulty` if it is one the daemon knows.

    Raises:
        UserError: it is outside 0-4.
    """
    allowed = contract.DIFFICULTIES
    if difficulty not in allowed:
        raise UserError(
            f"invalid difficulty {difficulty}: use {allowed.start} to {allowed.stop - 1} "
            f"(default {contract.DEFAULT_DIFFICULTY})"
        )
    return difficulty


def validate_timeout(timeout: int, *, what: str = "timeout") -> int:
    """Return `timeout` if it is a usable time limit in seconds.

    Raises:
        UserError: it is zero or negative.
    """
    if timeout <= 0:
        raise UserError(f"invalid {what} {timeout}: use a positive number of seconds")
    return timeout


def validate_mode(mode: str) -> Mode:
    """Return `mode` if this runner offers it.

    Raises:
        UserError: it is not one of the offered modes.
    """
    for offered in OFFERED_MODES:
        if mode == offered:
            return offered
    raise UserError(f"invalid mode {mode!r}: use {' or '.join(OFFERED_MODES)}")


def validate_egress(egress: str) -> Egress:
    """Return `egress` if it is a network policy.

    Raises:
        UserError: it is neither `restricted` nor `open`.
    """
    choices: tuple[Egress, ...] = get_args(Egress)
    for choice in choices:
        if egress == choice:
            return choice
    raise UserError(
        f"invalid egress {egress!r} (from --egress or {EGRESS_ENV}): use {' or '.join(choices)}"
    )


PREBUILT_ENV: Final = settings.PREBUILT.name
"""Environment variable giving `--prebuilt` its default (1: run published images)."""


def check_image_source(backend: str, builds_images: bool, prebuilt: bool) -> None:
    """Refuse to build images on a backend that cannot (`Backend.builds_images`).

    Raises:
        UserError: the backend runs prebuilt images only and `--prebuilt` was not given.
    """
    if not (builds_images or prebuilt):
        raise UserError(
            f"backend {backend!r} cannot build images and runs prebuilt "
            f"images only: add --prebuilt (or set {PREBUILT_ENV}=1)"
        )


PLATFORM_PATTERN: Final = re.compile(r"linux/[a-z0-9_]+(/v[0-9]+)?")
"""What `--platform` accepts: an OCI platform of Linux, with an optional variant."""


def validate_platform(platform: str) -> str:
    """Return `platform` if it names a Linux platform (`linux/<arch>[/<variant>]`).

    Raises:
        UserError: it is anything else.
    """
    if PLATFORM_PATTERN.fullmatch(platform) is None:
        raise UserError(
            f"invalid platform {platform!r}: use linux/<arch>, such as linux/amd64 or linux/arm64"
        )
    return platform
