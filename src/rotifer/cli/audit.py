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
from typing import TYPE_CHECKING, Any

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
        rotifer agent audit verify fmt
        rotifer agent audit show fmt --limit 20
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


def _open_history(ctx: click.Context, name: str, say: bool = True
                  ) -> tuple[MemoryStore, bool]:
    """:func:`_open` and False, or for an agent that was deleted (no spec, no
    memory) the project's store and True: its lines are kept in the log.  A
    memory another project moved into this one's store (no spec here) is
    opened too, with a hint unless not ``say`` (see :mod:`.guest`)."""
    from rotifer.genes.errors import AgentNotFound

    try:
        return _open(ctx, name), False
    except AgentNotFound as exc:
        gone = exc
    project = common.project_of(ctx)
    try:
        store = project.open_store(name, create=False)
    except Exception:
        raise gone from None
    if store.has_agent(name):  # a memory without a spec: not a deleted agent
        from .guest import hint, moved_in

        source = moved_in(store, name)
        if source is None:
            store.close()
            raise gone
        if say:  # another project moved it here: the history this log holds
            hint(name, source)
        return store, False
    return store, True


def _has_spec(ctx: click.Context, name: str) -> bool:
    from rotifer.agents.genome import Agents

    return Agents(common.project_of(ctx)).exists(name)


def _of_deleted(store: MemoryStore, name: str, lines: Iterable[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """A deleted agent's lines; AGENT_NOT_FOUND when the log has none of it."""
    from rotifer.genes.errors import AgentNotFound
    from rotifer.memory.audit.history import audit_history

    from .guest import gone, moved_away

    kept = list(lines)
    away = moved_away(store, name)
    if not kept and not any(True for _ in audit_history(store, name, limit=1)):
        raise AgentNotFound(
            gone(name) if away else
            f"no agent '{name}', and the audit log holds no history of one by that name")
    common.hint(f"agent '{name}' has no spec in this project: its memory was in this "
                "project's store until the project that keeps its spec moved it out; this "
                "is the history this project's log holds, up to the move out" if away else
                f"agent '{name}' was deleted; this is the history of its memory")
    return kept


@audit_group.command("verify")
@click.argument("name")
@click.option("--full", is_flag=True,
              help="read the whole shared log: the hash chain over every agent's lines "
                   "(by default NAME's own lines are checked, found by the history index)")
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
@click.pass_context
def verify_command(ctx: click.Context, name: str, full: bool, quiet: bool) -> None:
    """Check NAME's audit log: each of its lines as the store recorded it and
    linked to the line before it (or, with --full or when the history index
    cannot say, an intact hash chain over the whole log), ending where the
    store says (its anchor), and agreement with the store.

    Example:

    \b
        rotifer agent audit verify fmt
    """
    from rotifer.genes.errors import RotiferError
    from rotifer.memory.audit.verify import verify_agent

    progress, done = log_progress("verifying", quiet)
    try:
        store, deleted = _open_history(ctx, name, say=False)
        with store:
            from .guest import moved_away, moved_in, verify_guest, verify_moved_away

            if deleted and not _has_spec(ctx, name) and moved_away(store, name):
                done()
                click.echo("OK " + common.said(verify_moved_away(store, name)))
                return
            if deleted:  # no spec and no memory: the same refusal as before
                _open(ctx, name).close()

            source = None if _has_spec(ctx, name) else moved_in(store, name)
            if source is not None:
                done()
                click.echo("OK " + common.said(verify_guest(store, name, source)))
                return
            report = verify_agent(store, name, progress=progress, full=full)
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
              help="only lines at or after this time: RFC 3339 (2026-12-04T09:30:00Z), "
                   "or a date or date and minute taken as UTC (2026-12-04, 2026-12-04T09:30)")
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
        rotifer agent audit show fmt --key formatter/indent --since 2026-01-01 --limit 20
    """
    from rotifer.memory.audit.history import audit_history
    since_us = None if since is None else since_time(since)
    key = None if key is None else common.unshown(key)
    progress, done = log_progress("reading", quiet)
    try:
        store, deleted = _open_history(ctx, name)
        with store:
            lines = audit_history(store, name, key=key, actor=actor, since_us=since_us,
                                  limit=limit, progress=progress)
            if deleted:
                lines = iter(_of_deleted(store, name, lines))
    finally:
        done()
    if as_json:
        for line in lines:
            click.echo(json.dumps(line, ensure_ascii=True))
        return
    registry = common.project_of(ctx).registry().entries()
    names = {gid: str(info.get("name", "")) for gid, info in registry.items()}
    rows = (_row(line, names) for line in lines)
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


def _actor(actor: str, names: dict[str, str]) -> str:
    """A gene's v2 id shortened as ``agent memory list`` shows a creator
    (``v2:0123456789ab… (formatter)``); other actors (deployer, retention) whole."""
    if not actor.startswith("v2:"):
        return actor
    gene = names.get(actor)
    return f"{actor[:15]}… ({gene})" if gene else f"{actor[:15]}…"


def _row(line: dict[str, object], names: dict[str, str]) -> list[str]:
    return [str(line.get("ts", "")), "" if line.get("seq") is None else str(line["seq"]),
            str(line.get("action", "")), "" if line.get("key") is None else str(line["key"]),
            str(line.get("category") or ""), str(line.get("bytes", "")),
            _actor(str(line.get("actor") or ""), names) + _context(line.get("context"))]


def _context(context: object) -> str:
    """The run a change was made for (rotifer.memory.context), after the actor:
    `` thread T run R`` -- or nothing."""
    if not isinstance(context, dict):
        return ""
    parts = [f"{label} {context[name]}" for name, label in (("thread_id", "thread"),
                                                            ("run_id", "run"))
             if isinstance(context.get(name), str)]
    return "".join(" " + part for part in parts)


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


def since_time(text: str) -> int:
    """``--since`` as epoch microseconds: an RFC 3339 time, or (as the console's
    form takes it) a date ``YYYY-MM-DD`` or ``YYYY-MM-DDTHH:MM`` read as UTC.
    Anything else is a usage error naming the forms."""
    from rotifer.memory.clock import parse_time

    candidate = text
    if len(text) == 10:
        candidate = text + "T00:00:00Z"
    elif len(text) == 16 and text[10:11] in "Tt ":
        candidate = text + ":00Z"
    try:
        return parse_time(candidate)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a time: give RFC 3339 (2026-12-04T09:30:00Z) "
                                 "or a UTC date (2026-12-04, 2026-12-04T09:30)",
                                 param_hint="--since") from None
