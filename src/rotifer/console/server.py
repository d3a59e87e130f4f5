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

import ipaddress
import socket
from collections.abc import Callable

from rotifer.agents.project import Project
from rotifer.genes.errors import RotiferError

from .app import create_app
from .security import Secrets

DEFAULT_PORT = 8700


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RotiferError(f"cannot listen on {host} port {port}: {exc.strerror or exc} "
                           "(choose another with --port, or --port 0 for any free one)",
                           code="CONSOLE_ADDRESS") from None
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


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
    sock = bind(host, port)
    port = sock.getsockname()[1]
    secrets_ = Secrets()
    app = create_app(project, host=host, port=port, secrets_=secrets_)
    # No access log: request lines would carry the token on its first use.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            server_header=False)
    server = uvicorn.Server(config)
    # A wildcard address answers only loopback Host names (security.allowed_hosts).
    shown_host = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(
        host, f"[{host}]" if ":" in host else host)
    say(f"rotifer console for {project.root}\n"
        f"Open http://{shown_host}:{port}/?token={secrets_.token}\n"
        "(the token signs a browser in until the console stops; Ctrl-C stops it)")
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
