"""Pods read and watched through the official client's `ApiClient`, decoded by msgspec.

Why not `CoreV1Api`: kubernetes 37's generated API classes build their pydantic
models at import (`CoreV1Api` about 250 of them: 1 to 3 s of CPU, most of what
`ssebench runs list` cost), and each pod read is validated into those models.
Here a request goes through the same `ApiClient` (its kubeconfig, TLS, tokens,
proxies) and only the fields the backend reads are decoded, into Structs whose
attribute names are the models' (`status.container_statuses`, ...), so the code
that reads a pod takes either.

Watches replace polls wherever the backend waits for a pod (scheduled, started,
Running): the answer comes with the event, not at the next poll.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator
from datetime import datetime
from typing import Any, Final, TypeVar

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ssebench.spec import BackendError

T = TypeVar("T")

_WATCH_SLICE: Final = 60
"""Seconds the server holds one watch request open; a wait longer than that re-lists."""


class _Struct(msgspec.Struct, rename="camel", kw_only=True):
    pass


class Running(_Struct):
    started_at: datetime | None = None


class Terminated(_Struct):
    exit_code: int = 0
    reason: str | None = None


class Waiting(_Struct):
    reason: str | None = None


class ContainerState(_Struct):
    running: Running | None = None
    terminated: Terminated | None = None
    waiting: Waiting | None = None


class ContainerStatus(_Struct):
    name: str
    state: ContainerState | None = None
    image_id: str | None = msgspec.field(default=None, name="imageID")


class PodStatus(_Struct):
    phase: str | None = None
    pod_ip: str | None = msgspec.field(default=None, name="podIP")
    container_statuses: list[ContainerStatus] | None = None
    init_container_statuses: list[ContainerStatus] | None = None


class Container(_Struct):
    name: str
    image: str | None = None


class PodSpec(_Struct):
    containers: list[Container] = msgspec.field(default_factory=list)


class ObjectMeta(_Struct):
    name: str = ""
    namespace: str = ""
    uid: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    resource_version: str | None = None


class Pod(_Struct):
    """What the backend reads of a pod; attribute names as in `kubernetes.client.V1Pod`."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class Created(_Struct):
    """What the backend reads of an object it created (an owner reference needs its uid)."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class _ListMeta(_Struct):
    resource_version: str | None = None


class _PodList(_Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[Pod] = msgspec.field(default_factory=list)


class _Event(_Struct):
    type: str
    object: msgspec.Raw


class _Status(_Struct):
    code: int | None = None
    reason: str | None = None


_pod_list = msgspec.json.Decoder(_PodList)
_pod = msgspec.json.Decoder(Pod)
_created = msgspec.json.Decoder(Created)
_event = msgspec.json.Decoder(_Event)
_status = msgspec.json.Decoder(_Status)


def request(
    api: client.ApiClient,
    method: str,
    path: str,
    query: dict[str, str] | None = None,
    *,
    body: dict[str, Any] | None = None,
    timeout: float | tuple[float, float] | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """Send one request (a PATCH's `body` is a strategic merge patch), with `headers`
    besides the client's own; the urllib3 response, unread (stream it or read `.data`).

    Raises:
        ApiException: the server answered outside 2xx (mapped by `api_errors`).
    """
    headers = {"Accept": "application/json", **(headers or {})}
    if body is not None:
        merge = method == "PATCH"
        headers["Content-Type"] = f"application/{'strategic-merge-patch+' if merge else ''}json"
    prepared = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=list((query or {}).items()),
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    answer: Any = api.call_api(*prepared, _request_timeout=timeout)
    if not 200 <= answer.status <= 299:
        answer.read()
        raise ApiException.from_response(http_resp=answer, body=None, data=None)
    return answer.response


def create(api: client.ApiClient, path: str, obj: Any) -> Created:
    """POST `obj` (a client model or a dict) to the collection `path`.

    Raises:
        ApiException: the server refused it (mapped by `api_errors`).
    """
    body: dict[str, Any] = api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
    return _created.decode(request(api, "POST", path, body=body).data)


def _pods_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def list_pods(
    api: client.ApiClient, namespace: str, selector: str | None = None, field: str | None = None
) -> tuple[list[Pod], str | None]:
    """The pods matching `selector` (labels) and `field`, and the list's resource version."""
    query = {k: v for k, v in (("labelSelector", selector), ("fieldSelector", field)) if v}
    found = _pod_list.decode(request(api, "GET", _pods_path(namespace), query).data)
    return found.items, found.metadata.resource_version


def read_pod(api: client.ApiClient, namespace: str, name: str) -> Pod:
    """One pod by name."""
    return _pod.decode(request(api, "GET", f"{_pods_path(namespace)}/{name}").data)


def _watch(
    api: client.ApiClient, namespace: str, query: dict[str, str], version: str | None, seconds: int
) -> Generator[tuple[str, Pod | None], None, None]:
    """(event type, pod) from `version` on, for `seconds` at most; a pod of None means
    the watch expired (410 Gone) and must start again from a list."""
    params = {**query, "watch": "true", "timeoutSeconds": str(seconds)}
    if version:
        params.update(resourceVersion=version, allowWatchBookmarks="true")
    response = request(api, "GET", _pods_path(namespace), params, timeout=(10, seconds + 10))
    try:
        pending = b""
        for chunk in response.stream(64 * 1024):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                event = _event.decode(line)
                if event.type == "ERROR":
                    status = _status.decode(event.object)
                    if status.code == 410:
                        yield "EXPIRED", None
                        return
                    raise BackendError(f"watching pods failed: {status.code} {status.reason}")
                if event.type != "BOOKMARK":
                    yield event.type, _pod.decode(event.object)
    finally:
        response.release_conn()


def wait_for_pod(
    api: client.ApiClient,
    namespace: str,
    check: Callable[[Pod | None], T | None],
    *,
    timeout: float,
    what: str,
    selector: str | None = None,
    name: str | None = None,
) -> T:
    """Watch the pod named `name`, or the first matching `selector`, until `check` of it
    (None: there is none) says something other than None; return that. `check` may
    raise to end the wait.

    Raises:
        BackendError: `timeout` seconds passed first (naming `what`), or the watch failed.
    """
    deadline = time.monotonic() + timeout
    while True:
        field = f"metadata.name={name}" if name else None
        query = {k: v for k, v in (("labelSelector", selector), ("fieldSelector", field)) if v}
        pods, version = list_pods(api, namespace, selector, field)
        answer = check(pods[0] if pods else None)
        while answer is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BackendError(f"{what} did not happen in {timeout:.0f}s")
            expired = False
            seconds = max(1, min(_WATCH_SLICE, int(left) + 1))
            try:
                with contextlib.closing(_watch(api, namespace, query, version, seconds)) as events:
                    for kind, pod in events:
                        if pod is None:
                            expired = True
                            break
                        version = pod.metadata.resource_version or version
                        answer = check(None if kind == "DELETED" else pod)
                        if answer is not None:
                            break
            except ApiException as exc:
                if exc.status != 410:
                    raise
                expired = True  # too old a version to watch from: list again
            if expired:
                break
        if answer is not None:
            return answer
