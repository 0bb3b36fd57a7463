"""The OpenAPI document, generated from the route table and the msgspec Structs."""

from __future__ import annotations

from typing import Final

import msgspec

from ssebench.daemon._messages import ErrorResponse
from ssebench.daemon.server._app import ROUTES, RouteSpec
from ssebench.daemon.server._core import daemon_version

_ACCESS_NOTE: Final = {
    "all": "Every listener.",
    "tool": (
        "Agent-facing listeners during the agent phase (bencher: gated by the difficulty; "
        "403 once the agent phase is over); the admin socket always."
    ),
    "admin": "Admin socket only; 403 on agent-facing listeners.",
}

_ERRORS: Final = {
    "all": ("400", "404", "409", "500"),
    "tool": ("400", "403", "404", "413", "500"),
    "admin": ("403", "409", "413", "500"),
}

_REF: Final = "#/components/schemas/{name}"


def _operation(spec: RouteSpec, names: dict[type, str]) -> dict[str, object]:
    operation: dict[str, object] = {
        "summary": spec.summary,
        "description": _ACCESS_NOTE[spec.access],
        "operationId": f"{spec.method.lower()}{spec.path.replace('/', '_')}",
        "x-access": spec.access,
    }
    if spec.params:
        operation["parameters"] = [
            {
                "name": param.name,
                "in": "query",
                "required": param.required,
                "description": param.description,
                "schema": param.schema,
            }
            for param in spec.params
        ]
    if spec.request is not None:
        operation["requestBody"] = {
            "required": False,
            "content": {
                "application/json": {"schema": {"$ref": _REF.format(name=names[spec.request])}}
            },
        }
    error = {
        "content": {"application/json": {"schema": {"$ref": _REF.format(name="ErrorResponse")}}}
    }
    responses: dict[str, object] = {
        "200": {
            "description": "OK",
            "content": {
                "application/json": {"schema": {"$ref": _REF.format(name=names[spec.response])}}
            },
        }
    }
    for status in _ERRORS[spec.access]:
        responses[status] = {"description": "Error", **error}
    operation["responses"] = responses
    return operation


def openapi_document() -> dict[str, object]:
    """The daemon's OpenAPI 3.1 document."""
    types: list[type] = [ErrorResponse]
    for spec in ROUTES:
        for item in (spec.request, spec.response):
            if item is not None and item not in types:
                types.append(item)
    schemas, components = msgspec.json.schema_components(types, ref_template=_REF)
    names = {
        item: str(schema["$ref"]).rsplit("/", 1)[-1]
        for item, schema in zip(types, schemas, strict=True)
    }
    paths: dict[str, dict[str, object]] = {}
    for spec in ROUTES:
        paths.setdefault(spec.path, {})[spec.method.lower()] = _operation(spec, names)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "SSEBench daemon",
            "version": daemon_version(),
            "description": (
                "One API on three listeners: the agent-facing Unix socket "
                "(SSE_DAEMON_SOCKET) and HTTP port 4263, and the admin socket "
                "/run/ssebench/admin.sock. Errors are {error, code} with an honest status."
            ),
        },
        "paths": paths,
        "components": {"schemas": dict(sorted(components.items()))},
    }


def openapi_json() -> bytes:
    """The document as it is checked in: indented JSON with a trailing newline."""
    return msgspec.json.format(msgspec.json.encode(openapi_document()), indent=2) + b"\n"
