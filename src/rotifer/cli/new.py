"""``rotifer new gene NAME``: a gene that wraps and runs at once (see
:mod:`rotifer.agents.scaffold`)."""

from __future__ import annotations

import click

from . import common


@click.group("new")
def new_group() -> None:
    """Start something new in the project: a gene.

    Example:

    \b
        rotifer new gene hello
    """


@new_group.command("gene")
@click.argument("name")
@click.option("--python", "kind", flag_value="python", default=True,
              help="gene.py, def express(input, ctx) (the default)")
@click.option("--typescript", "kind", flag_value="typescript",
              help="index.ts on Node.js (needs `make node-deps` in the rotifer checkout)")
@click.option("--wat", "kind", flag_value="wat",
              help="gene.wat, WebAssembly text that `rotifer compile` builds (no toolchain)")
@click.pass_context
def new_gene_command(ctx: click.Context, name: str, kind: str) -> None:
    """Write genes/NAME: code, phenotype.json and tests.json that pass at once.

    An existing genes/NAME is refused (GENE_EXISTS), never overwritten.

    Example:

    \b
        rotifer new gene hello
        rotifer wrap hello
        rotifer test hello
        rotifer run hello --input '{"name": "Ada"}'
    """
    from rotifer.agents.scaffold import FILES, new_gene

    project = common.project_of(ctx)
    folder = new_gene(project, name, kind)  # type: ignore[arg-type]
    click.echo(f"Created gene '{name}' in {folder} ({FILES[kind]}, phenotype.json, "
               "tests.json)")
    command = "compile" if kind == "wat" else "wrap"
    click.echo(f"Next: rotifer {command} {name} && rotifer test {name}")
