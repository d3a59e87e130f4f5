"""``rotifer mcp --http``: Streamable HTTP on loopback, behind a bearer token.

Every request passes, in this order, before the SDK sees it:

1. **Host allowlist** (DNS rebinding): only ``127.0.0.1:PORT``, ``localhost:PORT``,
   ``[::1]:PORT`` (and the ``--host`` given) are answered; else 400, as the
   console answers.  The SDK's own Host check is set to the same list.
2. **Origin**: a request carrying an ``Origin`` header comes from a web page;
   only the server's own origins are let through (403 otherwise).  No answer
   carries ``Access-Control-Allow-Origin``: no CORS at all.
3. **The token** printed at start, as ``Authorization: Bearer TOKEN``, compared
   in constant time (``hmac.compare_digest``); missing is 401 with
   ``WWW-Authenticate: Bearer``, wrong is 401 too (nothing says which).

The token is never logged: uvicorn's access log is off and the token is only in
a header.  :class:`Protections` switches the checks off; only tests do that, to
show each attack succeeds without its protection.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PATH = "/mcp"


@dataclass(frozen=True)
class Protections:
    """Which checks run (all, except in tests that show an attack without one)."""

    host: bool = True
    origin: bool = True
    token: bool = True


@dataclass(frozen=True)
class Token:
    """The bearer token of one server run (never logged)."""

    value: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def matches(self, header: str | None) -> bool:
        if header is None or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[len("Bearer "):].strip().encode(), self.value.encode())


def allowed_hosts(host: str, port: int) -> list[str]:
    """The ``Host`` values answered: loopback names and the bind address, with the port."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    names.add(f"[{host}]" if ":" in host else host)
    return sorted(f"{name}:{port}".lower() for name in names)


class Guard:
    """The checks above, as ASGI middleware around the SDK's application."""

    def __init__(self, app: ASGIApp, token: Token, hosts: list[str],
                 protections: Protections) -> None:
        self.app = app
        self.token = token
        self.hosts = frozenset(hosts)
        self.origins = frozenset(f"http://{h}" for h in hosts)
        self.protections = protections

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # no websockets
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope["headers"]}
        p = self.protections
        if p.host and headers.get("host", "").lower() not in self.hosts:
            await _plain(send, 400, "Unknown Host header: use the address rotifer mcp printed.")
            return
        origin = headers.get("origin")
        if p.origin and origin is not None and origin.lower() not in self.origins:
            await _plain(send, 403, "Refused: requests from web pages are not served.")
            return
        if p.token and not self.token.matches(headers.get("authorization")):
            await _plain(send, 401, "Missing or wrong bearer token: use the token rotifer mcp "
                         "printed.", [(b"www-authenticate", b'Bearer realm="rotifer-mcp"')])
            return
        await self.app(scope, receive, send)


async def _plain(send: Send, status: int, text: str,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = text.encode() + b"\n"
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            (b"cache-control", b"no-store"), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


def http_app(server: Any, token: Token, host: str, port: int,
             protections: Protections = Protections()) -> ASGIApp:
    """The SDK's Streamable HTTP application for ``server`` behind the :class:`Guard`."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = allowed_hosts(host, port)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=protections.host, allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts])
    app = server.streamable_http_app(streamable_http_path=PATH, transport_security=security,
                                     host=host)
    return Guard(app, token, hosts, protections)
