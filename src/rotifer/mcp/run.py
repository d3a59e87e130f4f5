"""Opening an agent's memory as a gene or the deployer, and serving it over stdio or HTTP."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from rotifer.agents.acting import gene_memory
from rotifer.agents.genome import Agents
from rotifer.agents.project import require_memory
from rotifer.genes.errors import RotiferError

from .acting import VIA, Acting, DeployerActing, GeneActing, WritePolicy
from .http import PATH, Protections, Token, http_app
from .server import build_server

if TYPE_CHECKING:
    from rotifer.agents.project import Project


@contextlib.contextmanager
def opened(project: Project, agent: str, gene: str | None,
           policy: WritePolicy) -> Iterator[Acting]:
    """The agent's memory acting as ``gene`` (``None``: the deployer), closed after."""
    Agents(project).get(agent)  # AGENT_NOT_FOUND before anything is opened
    store = project.open_store(agent, create=False)
    try:
        require_memory(store, agent)
        if gene is None:
            yield DeployerActing(store.deployer(agent))
        else:
            yield GeneActing(gene_memory(project, store, agent, gene, via=VIA), policy)
    finally:
        store.close()


def serve_stdio(acting: Acting, policy: WritePolicy) -> None:
    """Serve until the client closes stdin (what desktop clients launch)."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(acting, policy)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


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
                           code="MCP_ADDRESS") from None
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_http(acting: Acting, policy: WritePolicy, host: str, port: int, *,
               say: Callable[[str], None], token: Token | None = None,
               protections: Protections | None = None) -> None:
    """Serve Streamable HTTP on loopback until Ctrl-C or SIGTERM."""
    import uvicorn

    if not is_loopback(host):
        raise RotiferError(f"{host} is not a loopback address: rotifer mcp serves only this "
                           "machine (use an SSH tunnel to reach it from elsewhere)",
                           code="MCP_ADDRESS")
    sock = bind(host, port)
    port = sock.getsockname()[1]
    token = token or Token()
    app = http_app(build_server(acting, policy), token, host, port,
                   protections or Protections())
    # No access log (request lines), no server header; warnings only.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            server_header=False)
    shown = f"[{host}]" if ":" in host else host
    say(f"rotifer mcp: agent '{acting.agent}' as "
        f"{'the deployer' if not acting.writes else 'gene ' + acting.actor}\n"
        f"URL: http://{shown}:{port}{PATH}\n"
        f"Token: {token.value}\n"
        "(send it as 'Authorization: Bearer TOKEN'; valid until the server stops; "
        "Ctrl-C stops it)")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
