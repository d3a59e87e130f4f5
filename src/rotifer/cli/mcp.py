"""``rotifer mcp``: an agent's memory for any MCP client (see docs/mcp.md).

The command imports the MCP room (and the SDK) only when it runs, so
``rotifer --help`` and every other command start without it.
"""

from __future__ import annotations

import click

from . import common


@click.command("mcp")
@click.argument("agent")
@click.option("--as", "gene", metavar="GENE",
              help="act as this gene of the agent (its v2 id and domain): its scopes apply")
@click.option("--deployer", is_flag=True,
              help="act as the agent's owner: read, list and delete anything; no writes")
@click.option("--http", "http", is_flag=True,
              help="serve Streamable HTTP on loopback with a bearer token (default: stdio)")
@click.option("--host", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="with --http: the loopback address to listen on")
@click.option("--port", default=8731, show_default=True, type=click.IntRange(0, 65535),
              help="with --http: the port (0: any free one)")
@click.option("--retention-days", type=click.IntRange(1, 2_147_483_647), metavar="DAYS",
              help="also take PATTERN and CONTEXT writes; every write expires DAYS days "
                   "after its last update")
@click.option("--allow-preference", is_flag=True,
              help="also take PREFERENCE writes (without --retention-days: trust the client, "
                   "every category written with no expiry)")
@click.pass_context
def mcp_command(ctx: click.Context, agent: str, gene: str | None, deployer: bool, http: bool,
                host: str, port: int, retention_days: int | None,
                allow_preference: bool) -> None:
    """Serve AGENT's memory to an MCP client (Claude Desktop, Claude Code, Cursor, ...).

    By default an LLM's writes go to CACHE only (untrusted input, first cleared
    for room); every write's audit line says "via": "mcp".

    Example:

    \b
        rotifer mcp fmt --as formatter
        rotifer mcp fmt --deployer

    (add --http --port 0 to serve Streamable HTTP on loopback instead of stdio)
    """
    if (gene is None) == (not deployer):
        raise click.UsageError("give exactly one of --as GENE and --deployer")
    if deployer and (retention_days is not None or allow_preference):
        raise click.UsageError("--retention-days and --allow-preference are for --as GENE "
                               "(the deployer writes nothing)")
    if not http and (host != "127.0.0.1" or port != 8731):
        raise click.UsageError("--host and --port go with --http")
    try:
        from rotifer.mcp.acting import WritePolicy
        from rotifer.mcp.run import opened, serve_http, serve_stdio
    except ImportError as exc:
        from rotifer.genes.errors import RotiferError

        raise RotiferError(f"rotifer mcp needs its extra: pip install 'rotifer[mcp]' "
                           f"({exc.name} is missing)", code="MCP_MISSING") from None
    project = common.project_of(ctx)
    policy = WritePolicy(retention_days, allow_preference)
    with opened(project, agent, gene, policy) as acting:
        if http:
            serve_http(acting, policy, host, port, say=lambda text: click.echo(text))
        else:
            serve_stdio(acting, policy)
