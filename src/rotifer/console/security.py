"""What keeps strangers out of the console: one ASGI middleware in front of every route.

The console shows an agent's memory and can delete it, so every request passes,
in this order:

1. **Host allowlist** (DNS rebinding): a page on ``evil.example`` whose name
   resolves to 127.0.0.1 reaches the console with ``Host: evil.example``; only
   the names the console was started for (``127.0.0.1:PORT``, ``localhost:PORT``,
   ``[::1]:PORT`` and the ``--host`` given) are answered.  Else 400.
2. **A one-time token** printed with the address signs one browser in: the
   first request carrying it gets a new session and a 303 redirect to the
   session's own secret path, ``/s/SECRET/...``, without the token; the token is
   then spent (a second use is 403) and the terminal shows a new address for
   the next browser.  A wrong token is 403.
3. **The session** is two secrets that travel apart: the cookie
   (``rotifer_console_PORT``, ``HttpOnly``, ``SameSite=Strict``, ``Path=/s/SECRET``)
   and the secret path of every page.  Cookies are not kept apart by port, so
   another server on this host may see a cookie; it never sees the path (pages
   send no ``Referer`` to other origins), and a cookie without its path, or a
   path without its cookie, is 401.  A session ends after
   :data:`IDLE_SECONDS` without a request and at logout; an address left in
   the browser's history then opens nothing.
4. **Methods**: reads are GET/HEAD, changes POST or DELETE, anything else 405.
   A change must carry an ``Origin`` of the console itself and the session's
   CSRF token (checked by the route, which reads the form:
   :meth:`Session.csrf_ok`).
5. Every answer, refusals included, carries no ``Access-Control-Allow-Origin``,
   a Content-Security-Policy allowing only the console's own scripts and
   styles, ``frame-ancestors 'none'``, ``Referrer-Policy: same-origin`` (not
   ``no-referrer``: with it chromium sends ``Origin: null`` on the console's own
   form posts) and ``Cache-Control: no-store``.

:class:`Protections` switches each check off; only the tests do that, to show
each attack succeeds without its protection.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"
#: Where every page of a session lives: ``/s/SECRET/``.
SESSION_ROOT = "/s/"
#: A session ends after this long without a request (documented in docs/console.md).
IDLE_SECONDS = 3600
READS = frozenset({"GET", "HEAD"})
CHANGES = frozenset({"POST", "DELETE"})
HEADERS = {
    "content-security-policy":
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
}


def _secret() -> str:
    return secrets.token_urlsafe(32)


def same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True)
class Protections:
    """Which checks run (all, except in tests that show an attack without one)."""

    host: bool = True
    token: bool = True
    #: The secret path as well as the cookie (off: the cookie alone opens every page).
    path: bool = True
    origin: bool = True
    csrf: bool = True
    #: The token signs in once (off: it signs in as often as it is used).
    once: bool = True


@dataclass
class Session:
    """One signed-in browser: its cookie, its secret path, its CSRF token, and a
    status line to show once (set by the server, never read from the address)."""

    cookie: str = field(default_factory=_secret)
    path: str = field(default_factory=_secret)
    csrf: str = field(default_factory=_secret)
    seen: float = 0.0
    flash: str | None = None

    @property
    def root(self) -> str:
        return f"{SESSION_ROOT}{self.path}"

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and same(given, self.csrf)

    def pop_flash(self) -> str | None:
        text, self.flash = self.flash, None
        return text


class Sessions:
    """The console run's token and sessions.  ``clock`` (seconds) and ``idle`` are
    parameters so the tests can move time instead of waiting."""

    def __init__(self, *, idle: float = IDLE_SECONDS,
                 clock: Callable[[], float] = time.monotonic,
                 announce: Callable[[str], None] | None = None) -> None:
        self.token = _secret()
        self.idle = idle
        self.clock = clock
        #: Told each new token once the previous one has signed a browser in.
        self.announce = announce
        self._sessions: dict[str, Session] = {}

    def sign_in(self, token: str, once: bool = True) -> Session | None:
        """A new session for the current token, which is then spent; else ``None``."""
        if not same(token, self.token):
            return None
        if once:
            self.token = _secret()
            if self.announce is not None:
                self.announce(self.token)
        return self.new()

    def new(self) -> Session:
        session = Session(seen=self.clock())
        self._sessions[session.cookie] = session
        return session

    def find(self, cookie: str | None) -> Session | None:
        """The live session with this cookie (its idle time restarts), else ``None``."""
        if not cookie:
            return None
        now = self.clock()
        for key in [k for k, s in self._sessions.items() if now - s.seen > self.idle]:
            del self._sessions[key]
        session = next((s for k, s in self._sessions.items() if same(cookie, k)), None)
        if session is not None:
            session.seen = now
        return session

    def end(self, session: Session) -> None:
        self._sessions.pop(session.cookie, None)

    def __len__(self) -> int:
        return len(self._sessions)


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` values the console answers: loopback names and the bind address."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    if host not in ("0.0.0.0", "::"):
        names.add(f"[{host}]" if ":" in host else host)
    return frozenset(f"{name}:{port}".lower() for name in names)


def cookie_name(port: int) -> str:
    """One cookie name per port: two consoles on one host do not overwrite each other's."""
    return f"rotifer_console_{port}"


def session_of(request: Request) -> Session:
    """The request's session (set by :class:`Guard`)."""
    session: Session = request.scope["rotifer.session"]
    return session


class Guard:
    """The checks above, as ASGI middleware around the whole application."""

    def __init__(self, app: ASGIApp, sessions: Sessions, hosts: frozenset[str], port: int,
                 protections: Protections) -> None:
        self.app = app
        self.sessions = sessions
        self.hosts = hosts
        self.cookie = cookie_name(port)
        self.origins = frozenset(f"http://{h}" for h in hosts)
        self.protections = protections
        #: With the token check off (tests only): one session for everyone.
        self.anyone = sessions.new() if not protections.token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # no websockets
        refusal = self._check(scope)
        if refusal is not None:
            await refusal(scope, receive, _with_headers(send))
            return
        await self.app(scope, receive, _with_headers(send))

    def _check(self, scope: Scope) -> Response | None:
        p = self.protections
        request = Request(scope)
        if p.host and request.headers.get("host", "").lower() not in self.hosts:
            return _plain(400, "Unknown Host header: open the address rotifer console printed.")
        token = request.query_params.getlist("token")
        if token:
            return self._sign_in(scope, request, token[-1])
        session = self._session(scope, request)
        if session is None:
            return _plain(401, "Not signed in: open the address rotifer console printed "
                          "(it carries a one-time token; after a sign-in the console "
                          "prints a new one).")
        scope["rotifer.session"] = session
        method = scope["method"]
        if method in CHANGES:
            if p.origin and request.headers.get("origin", "").lower() not in self.origins:
                return _plain(403, "Refused: a change must come from the console's own page "
                              "(Origin).")
        elif method not in READS:
            return _plain(405, "Method not allowed.", {"allow": "GET, HEAD, POST, DELETE"})
        return None

    def _sign_in(self, scope: Scope, request: Request, token: str) -> Response:
        session = self.sessions.sign_in(token, once=self.protections.once)
        if session is None:
            return _plain(403, "This sign-in address is wrong or was used already: open the "
                          "newest address rotifer console printed.")
        rest = urlencode([(k, v) for k, v in request.query_params.multi_items()
                          if k != "token"])
        path = scope.get("raw_path") or scope.get("path", "/").encode()
        if not path.startswith(b"/") or path.startswith(b"//"):
            path = b"/"  # never a redirect to another site ("//evil.example")
        root = session.root if self.protections.path else ""
        location = root.encode() + path + (f"?{rest}".encode() if rest else b"")
        cookie = (f"{self.cookie}={session.cookie}; HttpOnly; SameSite=Strict; "
                  f"Path={root or '/'}")
        return _plain(303, "See the console.", {"location": location.decode("latin-1"),
                                                "set-cookie": cookie})

    def _session(self, scope: Scope, request: Request) -> Session | None:
        """The live session this request names by its cookie *and* its path; the
        scope's ``root_path`` becomes the session's root, so links stay inside it."""
        if self.anyone is not None:
            scope["root_path"] = self.anyone.root if self._under(scope, self.anyone) else ""
            return self.anyone
        session = self.sessions.find(request.cookies.get(self.cookie))
        if session is None:
            return None
        if self._under(scope, session):
            scope["root_path"] = session.root
            return session
        return None if self.protections.path else session

    @staticmethod
    def _under(scope: Scope, session: Session) -> bool:
        path: str = scope.get("path", "")
        root = session.root
        return len(path) > len(root) and path[len(root)] == "/" and same(
            path[:len(root)], root)


def _with_headers(send: Send) -> Send:
    """``send`` adding :data:`HEADERS` to every answer (as Starlette's own
    middleware add theirs: :class:`MutableHeaders` over the start message)."""
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in HEADERS.items():
                headers.append(name, value)
        await send(message)
    return sending


def _plain(status: int, text: str, headers: dict[str, str] | None = None) -> Response:
    return PlainTextResponse(text + "\n", status_code=status, headers=headers)
