"""``rotifer console``: a deployer's pages over the project's agents (see docs/console.md)."""

from __future__ import annotations

import click

from . import common


@click.command("console")
@click.option("--host", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="the address to listen on (loopback only, unless --allow-remote)")
@click.option("--port", default=8700, show_default=True, type=click.IntRange(0, 65535),
              help="the port (0: any free one)")
@click.option("--allow-remote", is_flag=True,
              help="allow a --host that is not loopback (prints a warning)")
@click.pass_context
def console_command(ctx: click.Context, host: str, port: int, allow_remote: bool) -> None:
    """Open the console: every agent's memory, quota, policies and history in a browser.

    Prints an address with a one-time token that signs one browser in (then the
    next address, for another); a session ends after an hour idle or at logout.
    The console never shows values.

    Example:

    \b
        rotifer console --port 8700
    """
    try:
        from rotifer.console.server import serve
    except ImportError as exc:
        from rotifer.genes.errors import RotiferError

        raise RotiferError(f"the console needs its extra: pip install 'rotifer[console]' "
                           f"({exc.name} is missing)", code="CONSOLE_MISSING") from None
    project = common.project_of(ctx)
    serve(project, host, port, allow_remote=allow_remote,
          say=lambda text: click.echo(text),
          warn=lambda text: click.echo(text, err=True))
