"""JSON and YAML codecs: msgspec's errors become SSEBench's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import msgspec

from ssebench.spec._errors import DecodeError, TaskConfigError

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


def encode_json(value: object, *, pretty: bool = False) -> bytes:
    """Encode a Struct (or plain data) as JSON.

    Args:
        value: what to encode.
        pretty: indent for people (files on disk) instead of compact (wire).

    Returns:
        UTF-8 JSON bytes, with a trailing newline when pretty.
    """
    data = _encoder.encode(value)
    if pretty:
        return msgspec.json.format(data, indent=2) + b"\n"
    return data


def decode_json(data: bytes | str, into: type[T], *, what: str = "message") -> T:
    """Decode JSON into a type.

    Raises:
        DecodeError: the data is not JSON or does not match `into`; names `what`.
    """
    try:
        return msgspec.json.decode(data, type=into)
    except msgspec.DecodeError as exc:
        raise DecodeError(f"{what}: {exc}") from exc


def read_json(path: Path, into: type[T]) -> T:
    """Read and decode a JSON file.

    Raises:
        DecodeError: the file is unreadable, not JSON, or of the wrong shape.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DecodeError(f"{path}: cannot read: {exc.strerror}") from exc
    return decode_json(data, into, what=str(path))


def load_yaml_file(path: Path, into: type[T]) -> T:
    """Read a YAML file written by a person and convert it into a type.

    Raises:
        TaskConfigError: the file is missing, not YAML, or does not match `into`;
            the message names the file and the offending key.
    """
    import yaml  # here, not at the top: commands that read no YAML start faster without it

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        # libyaml's loader when PyYAML has it: the same documents, several times faster.
        raw: Any = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    except yaml.YAMLError as exc:
        raise TaskConfigError(f"{path}: not valid YAML: {exc}") from exc
    if raw is None:
        raw = {}
    try:
        return msgspec.convert(raw, type=into, strict=True)
    except msgspec.ValidationError as exc:
        raise TaskConfigError(f"{path}: {_describe(exc)}") from exc


def _describe(exc: msgspec.ValidationError) -> str:
    """Turn msgspec's `... - at `$.a.b`` into `key 'a.b': ...`, the way a YAML author thinks."""
    head, sep, where = str(exc).rpartition(" - at `$")
    if not sep:
        head, where = str(exc), ""
    key = where.rstrip("`").lstrip(".")
    if head.startswith("Object contains unknown field"):
        unknown = head.split("`")[1]
        return f"unknown key '{f'{key}.{unknown}' if key else unknown}'"
    return f"key '{key}': {head}" if key else head
