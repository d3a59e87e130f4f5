"""Serving the console: bind, print the address with its token, run uvicorn.

Why Starlette and uvicorn: the console is a handful of server-rendered pages
and two form posts.  Starlette is a small ASGI toolkit (routing, forms, static
files, Jinja2 templates) with few dependencies of its own, and uvicorn a small,
widely used ASGI server; both install from wheels, need no build step, and let
the tests run the real server on loopback.  A larger framework would bring an
ORM, sessions or an admin we do not want; the standard library's
``http.server`` has no routing, forms or safe defaults, and is documented as
not for production use.
"""

from __future__ import annotations

import gc
import ipaddress
import logging
import socket
from collections.abc import Callable
from typing import Any

from rotifer.agents.project import Project
from rotifer.genes.errors import RotiferError

from .app import create_app, error_text
from .security import IDLE_SECONDS, Sessions


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def addresses(host: str) -> list[tuple[int, str]]:
    """Every (family, address) ``host`` names: a literal IP itself, a name each
    address it resolves to (``localhost``: 127.0.0.1 and ::1)."""
    found: list[tuple[Any, ...]]
    try:
        found = list(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM))
    except socket.gaierror as exc:
        raise RotiferError(f"cannot resolve {host}: {exc.strerror or exc}",
                           code="CONSOLE_ADDRESS") from None
    out: list[tuple[int, str]] = []
    if host.lower().rstrip(".") == "localhost":
        # Browsers resolve localhost to loopback themselves, whatever /etc/hosts says
        # (Chromium tries [::1] first): both are the console's, or it does not start.
        found = [(socket.AF_INET, 0, 0, "", ("127.0.0.1", 0))] + (
            [(socket.AF_INET6, 0, 0, "", ("::1", 0, 0, 0))] if socket.has_ipv6 else []) + found
    for family, _, _, _, sockaddr in found:
        item = (int(family), str(sockaddr[0]))
        if family in (socket.AF_INET, socket.AF_INET6) and item not in out:
            out.append(item)
    return out


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address ``host`` names, all on one port.  A name
    it cannot bind on every one of its addresses is CONSOLE_ADDRESS: the browser
    may try the one left to whoever holds it (Chromium tries ``[::1]`` first for
    ``localhost``), and the token would go there."""
    found = addresses(host)
    for _ in range(20):  # --port 0: the first socket picks; another may hold it elsewhere
        socks: list[socket.socket] = []
        chosen = port
        try:
            for family, address in found:
                sock = socket.socket(family, socket.SOCK_STREAM)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and address != "::":
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    sock.bind((address, chosen))
                except OSError as exc:
                    where = f"[{address}]" if ":" in address else address
                    also = "" if address == host else f" (an address of {host})"
                    raise _Taken(f"cannot listen on {where} port {chosen}{also}: "
                                 f"{exc.strerror or exc}") from None
                chosen = chosen or sock.getsockname()[1]
        except _Taken as exc:
            for sock in socks:
                sock.close()
            if port == 0 and len(socks) > 1:
                continue  # the port picked on the first address is taken on another
            raise RotiferError(f"{exc} (choose another with --port, or --port 0 for any "
                               "free one)", code="CONSOLE_ADDRESS") from None
        for sock in socks:
            sock.listen(64)
            sock.set_inheritable(True)
        return socks
    raise RotiferError(f"cannot find a port free on every address of {host}",
                       code="CONSOLE_ADDRESS")


class _Taken(Exception):
    pass


class OneLine(logging.Filter):
    """An error the application raised on to uvicorn (Starlette does, after its
    500 page) is logged as the page says it, ``console: CODE: message``, without
    its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg, record.args = "console: %s", (error_text(record.exc_info[1]),)
            record.exc_info, record.exc_text = None, None
        return True


def one_line_errors() -> None:
    """Install :class:`OneLine` on uvicorn's error log (once)."""
    log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, OneLine) for f in log.filters):
        log.addFilter(OneLine())


def settle() -> None:
    """Once the console is ready to serve: collect what starting it left behind
    and freeze the rest (the modules, the app, its templates) out of the
    garbage collector's full passes (:func:`gc.freeze`).  A history page of
    500 lines makes thousands of objects that live through the request, so full
    collections come every few such pages; each then walks only what requests
    made since, not the whole program (measured: a full pass of ~20 ms becomes
    ~4 ms; it fell on about one big page in sixteen, so in the slowest
    percent)."""
    gc.collect()
    gc.freeze()


def serve(project: Project, host: str, port: int, *, allow_remote: bool,
          say: Callable[[str], None], warn: Callable[[str], None]) -> None:
    """Run the console until Ctrl-C (or SIGTERM)."""
    import uvicorn

    if not is_loopback(host):
        if not allow_remote:
            raise RotiferError(
                f"{host} is not a loopback address: anyone who can reach it could try the "
                "console; pass --allow-remote to do it anyway", code="CONSOLE_ADDRESS")
        warn(f"warning: the console listens on {host}, beyond this machine; anyone with "
             "the address below can read the agents' keys and delete their memory. Plain "
             "HTTP: use it only on a network you trust, or through an SSH tunnel instead.")
    socks = bind(host, port)
    port = socks[0].getsockname()[1]
    # A wildcard address answers only loopback Host names (security.allowed_hosts).
    shown_host = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(
        host, f"[{host}]" if ":" in host else host)

    def address(token: str) -> str:
        return f"http://{shown_host}:{port}/?token={token}"

    sessions = Sessions(announce=lambda token: say(
        f"A browser signed in. To sign in another, open {address(token)}"))
    app = create_app(project, host=host, port=port, sessions=sessions)
    # No access log: request lines would carry the token on its first use.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            server_header=False)
    server = uvicorn.Server(config)
    one_line_errors()
    say(f"rotifer console for {project.root}\n"
        f"Open {address(sessions.token)}\n"
        f"(the address signs one browser in, once; a session ends after "
        f"{IDLE_SECONDS // 60} idle minutes or at logout; Ctrl-C stops the console)")
    settle()
    try:
        server.run(sockets=socks)
    finally:
        for sock in socks:
            sock.close()
