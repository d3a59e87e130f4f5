"""A click group whose subcommands are imported when a command line names them.

Speed: ``rotifer agent run`` imports the module of ``agent run`` only, not
those of ``agent move``, ``agent audit``, ``agent delete``, ``agent show`` (the
transfer, audit-reading and deletion code with theirs); ``rotifer --help``
imports none of them.  The listing in ``--help`` imports each module, as the
command's short help is written in it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import click


class LazyGroup(click.Group):
    """A group with ``lazy``: command name -> ``"module:attribute"`` of a click command."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attribute = self.lazy[cmd_name].partition(":")
            command = getattr(import_module(module), attribute)
            if not isinstance(command, click.Command):  # pragma: no cover - a wrong table
                raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)
