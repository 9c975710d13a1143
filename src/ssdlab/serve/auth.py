"""Who may see the dashboard: the bind check and the access-token gate.

* Bound to a loopback address (the default, 127.0.0.1) the dashboard needs no token, and
  answers only requests whose ``Host`` names a loopback address or ``localhost``: a web
  page elsewhere cannot read it through a DNS name re-pointed at 127.0.0.1.
* Any other address needs a token (``--token`` or ``$SSDLAB_SERVE_TOKEN``); without one
  the command is refused before it binds.
* With a token, every request (pages, data, live streams, metrics, assets) must carry it:
  ``Authorization: Bearer TOKEN``, or the cookie set when a page is opened once with
  ``?token=TOKEN`` (the browser is sent on to the same address without it). Anything
  else gets 401 and the word "unauthorized", nothing more.

The gates are plain ASGI middleware (no framework needed to test them).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from ssdlab.errors import UserError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_ENV = "SSDLAB_SERVE_TOKEN"
COOKIE = "ssdlab_token"
MIN_TOKEN_CHARS = 16
LOCAL_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, or ``localhost``) is this machine's loopback only."""
    name = host.strip().strip("[]").lower()
    if name in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse (one line, exit 2) a non-loopback address without a token, or a token too
    short to be a secret."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise UserError(f"the access token must be at least {MIN_TOKEN_CHARS} characters "
                        "(make one: python3 -c 'import secrets; print(secrets.token_urlsafe())')")
    if token is None and not is_loopback(host):
        raise UserError(f"--host {host} is reachable from other machines: give an access "
                        f"token (--token or ${TOKEN_ENV}), or serve on 127.0.0.1 "
                        "(docs/serve.md)")


def cookie_value(token: str) -> str:
    """What the cookie holds: a keyed hash of the token, not the token itself."""
    return hmac.new(token.encode(), b"ssdlab serve cookie", hashlib.sha256).hexdigest()


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        out.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


async def _respond(send: Send, status: int, body: bytes,
                   headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


async def unauthorized(send: Send) -> None:
    await _respond(send, 401, b"unauthorized\n", [(b"www-authenticate", b"Bearer")])


class TokenGate:
    """Lets through only requests carrying the token (see the module's docstring)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie_value(token)

    def allowed(self, scope: Scope) -> bool:
        headers = _headers(scope)
        auth = headers.get("authorization", "")
        scheme, _, given = auth.partition(" ")
        if scheme.lower() == "bearer" and _same(given.strip(), self.token):
            return True
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no cookie
            return False
        morsel = cookies.get(COOKIE)
        return morsel is not None and _same(morsel.value, self.cookie)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        given = [v for k, v in query if k == "token"]
        if given and scope["type"] == "http":
            if not _same(given[-1], self.token):
                await unauthorized(send)
                return
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            # relative: right behind a proxy that serves the dashboard under a prefix too
            location = (scope["path"].rsplit("/", 1)[-1] or "./") + (f"?{rest}" if rest else "")
            cookie = f"{COOKIE}={self.cookie}; Path=/; HttpOnly; SameSite=Strict"
            await _respond(send, 303, b"", [(b"location", location.encode("latin-1")),
                                            (b"set-cookie", cookie.encode()),
                                            (b"cache-control", b"no-store")])
            return
        if not self.allowed(scope):
            await unauthorized(send)
            return
        await self.app(scope, receive, send)


class LocalHostGate:
    """Bound to loopback without a token: only requests for a loopback ``Host``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = _headers(scope).get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if host and not is_loopback(name):
                await _respond(send, 403, b"forbidden: this dashboard answers only for "
                               b"localhost (docs/serve.md)\n", [])
                return
        await self.app(scope, receive, send)


def gate(app: ASGIApp, token: str | None) -> ASGIApp:
    """``app`` behind the token gate, or, without a token, the local-host gate."""
    return TokenGate(app, token) if token is not None else LocalHostGate(app)
