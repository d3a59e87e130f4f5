"""``rotifer agent audit verify | show``: the deployer checks and reads an agent's history.

* ``agent audit verify NAME`` checks the audit log's hash chain and replays the
  agent's committed changes against its store (keys, categories, sizes,
  creators, the change number); exit 0 with a one-line summary when they
  agree, else ``AUDIT_MISMATCH: <the first disagreement>`` and exit 1.  Changes
  found logged but never committed (a writer that died) get their
  ``rolled_back`` line.  See :mod:`rotifer.memory.audit.verify`.
* ``agent audit show NAME [--key K] [--actor ID] [--since T] [--limit N] [--json]``
  prints the agent's committed history, newest first, across every store it
  has lived in.  No line holds a value; keys and other text a gene chose are
  printed with control characters escaped, so a key cannot move the cursor or
  forge a line of output.

Both read the log in a stream (memory bounded whatever its size) and draw a
progress bar on stderr while they read, when stderr is a terminal (not with
``--quiet``).  ``show``'s table takes its column widths from its first
:data:`PAGE` rows, so it too never holds the whole history.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import click

from . import common
from .progress import ProgressBar, progress_bar

if TYPE_CHECKING:
    from rotifer.memory.audit.read import Scan
    from rotifer.memory.store import MemoryStore

#: Rows of ``audit show``'s table whose widths set the columns' widths.
PAGE = 1000
QUIET_HELP = "no progress bar (it is drawn on stderr only when that is a terminal)"
HEADERS = ["TS", "SEQ", "ACTION", "KEY", "CATEGORY", "BYTES", "ACTOR"]


def log_progress(label: str, quiet: bool) -> tuple[Callable[[Scan], None] | None,
                                                    Callable[[], None]]:
    """A callback that shows how far each pass over the log got (a new bar for
    each pass), and the call that ends the last bar."""
    bars: list[ProgressBar] = []
    passes: list[Scan] = []
    if progress_bar(label, quiet=quiet) is None:
        return None, lambda: None

    def report(stats: Scan) -> None:
        bar = bars[-1] if bars else None
        if bar is None or stats is not passes[-1]:  # each pass counts in a Scan of its own
            passes.append(stats)
            if bar is not None:
                bar.finish()
            bar = progress_bar(label, quiet=quiet)
            assert bar is not None
            bars.append(bar)
            bar.start(None, stats.total)
        bar.advance(stats.lines - bar.entries, stats.done - bar.nbytes)

    def finish() -> None:
        if bars:
            bars[-1].finish()

    return report, finish


@click.group("audit")
def audit_group() -> None:
    """Check and read an agent's audit log (history of its memory, never values).

    Example:

    \b
        rotifer agent audit verify helper
        rotifer agent audit show helper --limit 20
    """


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
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
@click.pass_context
def verify_command(ctx: click.Context, name: str, quiet: bool) -> None:
    """Check NAME's audit log: an intact hash chain that ends where the store says
    (its anchor), and agreement with the store.

    Example:

    \b
        rotifer agent audit verify helper
    """
    from rotifer.genes.errors import RotiferError
    from rotifer.memory.audit.verify import verify_agent

    progress, done = log_progress("verifying", quiet)
    try:
        with _open(ctx, name) as store:
            report = verify_agent(store, name, progress=progress)
    finally:
        done()
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
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
@click.pass_context
def show_command(ctx: click.Context, name: str, key: str | None, actor: str | None,
                 since: str | None, limit: int | None, as_json: bool, quiet: bool) -> None:
    """NAME's history, newest first: what changed, when, by whom -- never values.

    Example:

    \b
        rotifer agent audit show helper --key formatter/indent --limit 20
    """
    from rotifer.memory.audit.history import audit_history
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
    progress, done = log_progress("reading", quiet)
    try:
        with _open(ctx, name) as store:
            lines = audit_history(store, name, key=key, actor=actor, since_us=since_us,
                                  limit=limit, progress=progress)
    finally:
        done()
    if as_json:
        for line in lines:
            click.echo(json.dumps(line, ensure_ascii=True))
        return
    rows = (_row(line) for line in lines)
    first = [row for _, row in zip(range(PAGE), rows, strict=False)]
    if not first:
        click.echo("No audit lines" + (" match" if key or actor or since else ""))
        return
    cut: list[bool] = []
    for text in _table(first, rows, cut):
        click.echo(text)
    if cut:
        click.echo(common.CUT_NOTE)


#: The KEY column of :data:`HEADERS`.
KEY = 3


def _row(line: dict[str, object]) -> list[str]:
    return [str(line.get("ts", "")), "" if line.get("seq") is None else str(line["seq"]),
            str(line.get("action", "")), "" if line.get("key") is None else str(line["key"]),
            str(line.get("category") or ""), str(line.get("bytes", "")),
            str(line.get("actor") or "")]


def _table(first: Sequence[list[str]], rest: Iterable[list[str]],
           cut: list[bool]) -> Iterable[str]:
    """:func:`common.table` of the first rows, and the rest in the same columns;
    keys are cut at :data:`common.KEY_WIDTH` (``cut`` gets an item if one was)."""
    yield from common.table(HEADERS, first, {KEY: common.KEY_WIDTH})
    if common.any_cut(row[KEY] for row in first):
        cut.append(True)
    shown = [_shown(row) for row in first]
    sizes = [max([len(h), *(len(r[i]) for r in shown)]) for i, h in enumerate(HEADERS)]
    for row in rest:
        cells = _shown(row)
        if not cut and common.any_cut([row[KEY]]):
            cut.append(True)
        yield "  ".join(c.ljust(w) for c, w in zip(cells, sizes, strict=True)).rstrip()


def _shown(row: list[str]) -> list[str]:
    cells = [common.shown(cell) for cell in row]
    cells[KEY] = common.cut(cells[KEY])
    return cells
