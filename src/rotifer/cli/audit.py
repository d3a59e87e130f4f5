"""``rotifer agent audit verify | show``: the deployer checks and reads an agent's history.

* ``agent audit verify NAME`` checks the audit log's hash chain and replays the
  agent's committed changes against its store (keys, categories, sizes,
  creators, the change number); exit 0 with a one-line summary when they
  agree, else ``AUDIT_MISMATCH: <the first disagreement>`` and exit 1.  Changes
  found logged but never committed (a writer that died) get their
  ``rolled_back`` line.  See :mod:`rotifer.memory.audit_verify`.
* ``agent audit show NAME [--key K] [--actor ID] [--since T] [--limit N] [--json]``
  prints the agent's committed history, newest first.  No line holds a value;
  keys and other text a gene chose are printed with control characters
  escaped, so a key cannot move the cursor or forge a line of output.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from . import common

if TYPE_CHECKING:
    from rotifer.memory.store import MemoryStore


@click.group("audit")
def audit_group() -> None:
    """Check and read an agent's audit log (history of its memory, never values)."""


def _open(ctx: click.Context, name: str) -> MemoryStore:
    from rotifer.agents.genome import Agents

    project = common.project_of(ctx)
    Agents(project).get(name)
    from rotifer.agents.project import require_memory

    store = project.open_store(name, create=False)  # reading or checking never creates it
    try:
        require_memory(store, name)
    except BaseException:
        store.close()
        raise
    return store


@audit_group.command("verify")
@click.argument("name")
@click.pass_context
def verify_command(ctx: click.Context, name: str) -> None:
    """Check NAME's audit log: an intact hash chain, and agreement with the store."""
    from rotifer.genes.errors import RotiferError
    from rotifer.memory.audit_verify import verify_agent

    with _open(ctx, name) as store:
        report = verify_agent(store, name)
    if not report.ok:
        raise RotiferError(report.message, code="AUDIT_MISMATCH")  # escaped as it is printed
    message = report.message
    if report.repaired:
        message += (f"; {common.plural(report.repaired, 'change')} logged but never committed "
                    "now marked rolled_back")
    click.echo("OK " + common.said(message))


@audit_group.command("show")
@click.argument("name")
@click.option("--key", default=None, metavar="K",
              help="only lines about this key, as the tables show it (\\\\ is a backslash)")
@click.option("--actor", default=None, metavar="ID",
              help="only lines of this actor (a gene's v2 id, deployer, retention)")
@click.option("--since", default=None, metavar="T",
              help="only lines at or after this RFC 3339 time")
@click.option("--limit", default=None, type=click.IntRange(min=1), metavar="N",
              help="at most N lines (the newest)")
@click.option("--json", "as_json", is_flag=True, help="one JSON line per audit line")
@click.pass_context
def show_command(ctx: click.Context, name: str, key: str | None, actor: str | None,
                 since: str | None, limit: int | None, as_json: bool) -> None:
    """NAME's history, newest first: what changed, when, by whom -- never values."""
    from rotifer.memory.audit_verify import agent_history
    from rotifer.memory.clock import parse_time
    from rotifer.memory.errors import invalid

    since_us = None
    if since is not None:
        try:
            since_us = parse_time(since)
        except ValueError:
            raise invalid(f"--since must be an RFC 3339 time such as "
                          f"2026-01-01T00:00:00Z, not {since!r}") from None
    key = None if key is None else common.unshown(key)
    with _open(ctx, name) as store:
        lines = agent_history(store, name, key=key, actor=actor, since_us=since_us, limit=limit)
    if as_json:
        for line in lines:
            click.echo(json.dumps(line, ensure_ascii=True))
        return
    if not lines:
        click.echo("No audit lines" + (" match" if key or actor or since else ""))
        return
    rows = [[str(line.get("ts", "")), "" if line.get("seq") is None else str(line["seq"]),
             str(line.get("action", "")),
             "" if line.get("key") is None else str(line["key"]),
             str(line.get("category") or ""), str(line.get("bytes", "")),
             str(line.get("actor") or "")] for line in lines]
    for text in common.table(["TS", "SEQ", "ACTION", "KEY", "CATEGORY", "BYTES", "ACTOR"],
                             rows, {3: common.KEY_WIDTH}):
        click.echo(text)
    if common.any_cut(row[3] for row in rows):
        click.echo(common.CUT_NOTE)
