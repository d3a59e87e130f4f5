"""What keeps strangers out of the console: one ASGI middleware in front of every route.

The console shows an agent's memory and can delete it, so every request passes,
in this order:

1. **Host allowlist** (DNS rebinding): a page on ``evil.example`` whose name
   resolves to 127.0.0.1 reaches the console with ``Host: evil.example``; only
   the names the console was started for (``127.0.0.1:PORT``, ``localhost:PORT``,
   ``[::1]:PORT`` and the ``--host`` given) are answered.  Else 400.
2. **The token** printed with the URL is traded once per browser for a session
   cookie (``HttpOnly``, ``SameSite=Strict``, ``Path=/``) and a 303 redirect to the
   same address without it, so it leaves the address bar and history.  A wrong
   token is 403; a request with neither the token nor the cookie is 401.
3. **Methods**: reads are GET/HEAD, changes POST or DELETE, anything else 405.
   A change must carry an ``Origin`` of the console itself (a cross-site form
   or ``fetch`` carries its own origin; a missing one is refused too) and the
   page's CSRF token (checked by the route, which reads the form:
   :meth:`Secrets.csrf_ok`).
4. Every answer, refusals included, carries no ``Access-Control-Allow-Origin``
   (nothing here adds one: another origin's script can send but never read),
   a Content-Security-Policy allowing only the console's own scripts and
   styles, ``frame-ancestors 'none'`` (no clickjacking), ``Referrer-Policy:
   same-origin`` (not ``no-referrer``: with it chromium sends ``Origin: null`` on
   the console's own form posts) and ``Cache-Control: no-store``.

:class:`Protections` switches each check off; only the tests do that, to show
each attack succeeds without its protection.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "rotifer_console"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"
READS = frozenset({"GET", "HEAD"})
CHANGES = frozenset({"POST", "DELETE"})
HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
]


@dataclass(frozen=True)
class Protections:
    """Which checks run (all, except in tests that show an attack without one)."""

    host: bool = True
    token: bool = True
    origin: bool = True
    csrf: bool = True


@dataclass(frozen=True)
class Secrets:
    """The random values of one console run: the URL token, the session cookie's
    value and the CSRF token pages carry.  None of them is ever logged."""

    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` values the console answers: loopback names and the bind address."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    if host not in ("0.0.0.0", "::"):
        names.add(f"[{host}]" if ":" in host else host)
    return frozenset(f"{name}:{port}".lower() for name in names)


class Guard:
    """The checks above, as ASGI middleware around the whole application."""

    def __init__(self, app: ASGIApp, secrets_: Secrets, hosts: frozenset[str],
                 protections: Protections) -> None:
        self.app = app
        self.secrets = secrets_
        self.hosts = hosts
        self.origins = frozenset(f"http://{h}" for h in hosts)
        self.protections = protections

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # no websockets
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)

    def _refusal(self, scope: Scope, headers: dict[str, str]
                 ) -> Callable[[Send], Awaitable[None]] | None:
        p = self.protections
        if p.host and headers.get("host", "").lower() not in self.hosts:
            return _plain(400, "Unknown Host header: open the address rotifer console printed.")
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        token = [v for k, v in query if k == "token"]
        if token:
            if not hmac.compare_digest(token[-1].encode(), self.secrets.token.encode()):
                return _plain(403, "Wrong token: open the address rotifer console printed.")
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            path = scope.get("raw_path") or scope.get("path", "/").encode()
            if not path.startswith(b"/") or path.startswith(b"//"):
                path = b"/"  # never a redirect to another site ("//evil.example")
            return _redirect(path + (f"?{rest}".encode() if rest else b""),
                             self.secrets.session)
        if p.token and not self._has_session(headers):
            return _plain(401, "Not signed in: open the address rotifer console printed "
                          "(it carries the token).")
        method = scope["method"]
        if method in CHANGES:
            if p.origin and headers.get("origin", "").lower() not in self.origins:
                return _plain(403, "Refused: a change must come from the console's own page "
                              "(Origin).")
        elif method not in READS:
            return _plain(405, "Method not allowed.", [(b"allow", b"GET, HEAD, POST, DELETE")])
        return None

    def _has_session(self, headers: dict[str, str]) -> bool:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no session
            return False
        morsel = jar.get(COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value.encode(),
                                                          self.secrets.session.encode())


def _plain(status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None
           ) -> Callable[[Send], Awaitable[None]]:
    body = text.encode() + b"\n"

    async def respond(send: Send) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode()),
                                *(extra or []), *HEADERS]})
        await send({"type": "http.response.body", "body": body})

    return respond


def _redirect(location: bytes, session: str) -> Callable[[Send], Awaitable[None]]:
    cookie = f"{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/"
    return _plain(303, "See the console.", [(b"location", location),
                                            (b"set-cookie", cookie.encode())])
