"""Who may use the page: whoever has the token the command printed (as Jupyter does).

The token comes once in the URL (`?token=`); the answer sets it as an HttpOnly,
SameSite=Strict cookie and redirects to the same page without it, so it leaves
the address bar. Every page, API call and WebSocket needs it. WebSockets are
also refused from a page of another origin: a browser sends the cookie with a
WebSocket any site opens, and the Origin header is what tells them apart.
"""

from __future__ import annotations

import hmac
import secrets
from http.cookies import CookieError, SimpleCookie
from typing import Final
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE: Final = "ssebench_web_token"
QUERY: Final = "token"


def new_token() -> str:
    """A random token of 256 bits, URL-safe."""
    return secrets.token_urlsafe(32)


def _headers(scope: Scope) -> dict[str, str]:
    return {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}


class TokenGate:
    """ASGI middleware: lets through only requests that carry the token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    def _valid(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get("cookie", ""))
        except CookieError:
            cookies = SimpleCookie()  # a malformed cookie header carries no token
        from_cookie = cookies[COOKIE].value if COOKIE in cookies else None
        from_query = query.get(QUERY)
        if scope["type"] == "websocket":
            if not (self._valid(from_cookie) or self._valid(from_query)):
                await _refuse_websocket(receive, send)
                return
            if not _same_origin(headers):
                await _refuse_websocket(receive, send)
                return
            await self.app(scope, receive, send)
            return
        if self._valid(from_query):
            # First visit: keep the token in a cookie, drop it from the address.
            rest = urlencode([(key, value) for key, value in query.items() if key != QUERY])
            target = scope.get("path", "/") + (f"?{rest}" if rest else "")
            cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [
                        (b"location", target.encode("latin-1")),
                        (b"set-cookie", cookie.encode("latin-1")),
                        (b"cache-control", b"no-store"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        if not self._valid(from_cookie):
            body = b"403 Forbidden: open the URL with the token that `ssebench web` printed\n"
            await send(
                {
                    "type": "http.response.start",
                    "status": 403,
                    "headers": [
                        (b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def _same_origin(headers: dict[str, str]) -> bool:
    """Whether a WebSocket comes from a page this server served (Origin matches Host)."""
    origin = headers.get("origin")
    host = headers.get("host")
    if origin is None or host is None:
        # Browsers always send Origin with a WebSocket; a client without one is no page.
        return origin is None and host is not None
    return origin in (f"http://{host}", f"https://{host}")


async def _refuse_websocket(receive: Receive, send: Send) -> None:
    message = await receive()
    if message["type"] == "websocket.connect":
        # Closing before accepting: the server answers the handshake with 403.
        await send({"type": "websocket.close", "code": 1008})
