"""Reading the audit log back: is it intact, anchored, and does it agree with the store?

:func:`verify_agent` (``rotifer agent audit verify``) does four things, all of
them in a stream (memory bounded by the agent's entries and its largest
change, never by the log's size; see :mod:`rotifer.memory.audit.read`):

1. Checks the hash chain over every line of every file of the log (the
   rolled-over ``audit.jsonl.N`` oldest first, then ``audit.jsonl``): each
   line's ``prev`` must be the SHA-256 of the line before it, and the first
   line's ``prev`` must be ``null``.  An edited, removed, inserted or reordered
   line breaks the link of the line after it.  Lines written by an older
   rotifer (no ``prev``) are counted and reported, not checked.
2. Checks the anchor: the store commits, with each change, the hash of that
   change's last line (the agent's ``head``).  The log's last line of the
   agent's last committed change must hash to it.  A forger who edits a line
   and recomputes every hash after it changes that last line's hash too (it
   links, through the chain, every line before it), so a rewritten log no
   longer ends where the store says, however consistent its own chain is.
3. Decides which changes of the agent's history were committed, from the
   lines and the store alone.  The history is the agent's *lineage* across
   the stores it has lived in (:mod:`rotifer.memory.audit.lineage`).
   Committed changes are numbered 1, 2, 3, ... without gaps, so a change
   numbered N was *not* committed if a ``rolled_back`` line names N, or the
   next change is numbered N again, or it is the last change and the store's
   ``next_seq`` is still N.  Any other jump in numbers is reported.
4. Replays the committed changes (key -> category, bytes, createdBy) and
   compares the result, and the last committed number, with the store.

Changes found not committed that have no ``rolled_back`` line yet (their
process died) get one appended, unless ``repair=False`` -- only changes of
the history being verified, each proven uncommitted by the rules above, so
no change committed anywhere is ever marked.  All of this runs holding the
agent (a write transaction that changes nothing), so no change of the agent
is between appending its lines and committing meanwhile.

Most of the time none of that reads the shared log: when the history index
is whole for the agent and carries each line's SHA-256 (:func:`from_index`),
the agent's own lines are read at their places and each must hash to the
digest the store committed with it and name the line before it in the log
(its link in); the anchor and the replay are as above (on PostgreSQL the
replay is of the database's copy, as below).  Anything it cannot vouch for
sends verify to the whole log (``full=True`` always does), which names the
first thing wrong and rebuilds the index.

With a backend that keeps the lines itself (PostgreSQL's ``memory_audit``,
written in each change's own transaction), the history's segments that lived
there are read from there -- only committed changes, in commit order, from
every worker -- and the local file gives the chain, the anchor (when this
worker wrote the last change) and the changes of this worker that never
committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clock import format_time
from ..storage.backend import AgentRecord, Transaction
from .actions import ROLLED_BACK
from .history import StoreParts, is_simple
from .index import Entry, entry_of, rows_for
from .lineage import history_lines, lineage, note_import
from .own import by_index
from .places import Placed
from .read import Logged, LogProblem, Scan, read_chained, scan
from .replay import Replay, compare, counted
from .text import rolled_back_line

__all__ = ["LogProblem", "Logged", "Report", "read_chained", "verify_agent"]


@dataclass
class Report:
    ok: bool
    message: str
    changes: int = 0
    lines: int = 0
    legacy: int = 0
    repaired: int = 0
    phantoms: list[int] = field(default_factory=list)
    #: The agent's rows for the history index, as the log holds them (phantoms left out).
    index_rows: list[tuple[Any, ...]] = field(default_factory=list, repr=False)


@dataclass
class _Anchor:
    """What the first pass saw of the store's last committed change."""

    digest: str | None = None
    ts: Any = None
    where: str = ""
    own_lines: int = 0
    legacy: int = 0
    #: Each of the agent's lines as an index row, with its time (see :func:`_index_rows`).
    places: list[tuple[Entry, Any]] = field(default_factory=list)


def _first_pass(path: Path, agent: str, record: AgentRecord | None, stats: Scan,
                imports: dict[str, tuple[int, str]],
                progress: Callable[[Scan], None] | None) -> _Anchor:
    """The chain over the whole log; the agent's imports; its last change's last line."""
    found = _Anchor()
    last = None if record is None else (record.epoch, record.next_seq - 1)
    times: dict[str, int] = {}
    for logged in scan(path, agent, stats, progress=progress):
        line = logged.line
        found.own_lines += 1
        if "prev" not in line:
            found.legacy += 1
        note_import(imports, line)
        if logged.place is not None:
            entry = entry_of(line, *logged.place, times,
                             bytes.fromhex(logged.digest) if logged.digest else None)
            if entry is not None:
                found.places.append((entry, line.get("ts")))
        if last is not None and line.get("seq") == last[1] and \
                line.get("epoch", "") == last[0] and line.get("action") != ROLLED_BACK:
            found.digest, found.ts, found.where = logged.digest, line.get("ts"), logged.where
    return found


def _check_anchor(found: _Anchor, record: AgentRecord, committed_ts: Any,
                  kept: bool) -> str:
    """Raise :class:`LogProblem` unless the log's last change ends at the store's
    anchor; a note when it cannot be checked here."""
    if not record.head:
        return ""  # nothing committed since the anchor was added: nothing to check
    n = record.next_seq - 1
    if kept and (found.digest is None or found.ts != committed_ts):
        return f"; change {n} was written by another worker, its anchor not checked here"
    if found.digest is None:
        raise LogProblem(f"the store's last committed change of {record.agent_id!r} is {n}, "
                         "and the log has no line of it (the log was cut or rewritten)")
    if found.digest != record.head:
        raise LogProblem(
            f"{found.where}: the log's change {n} does not end with the line the store "
            "committed with it (its anchor): the log was rewritten after the change")
    return "; it ends where the store says"


def verify(tx: Transaction, path: Path, agent: str, *, anchor: bool = True,
           progress: Callable[[Scan], None] | None = None) -> tuple[Report, Replay | None]:
    """Check the log at ``path`` (and the backend's own copy, if it keeps one)
    against ``tx``'s store."""
    record = tx.get_agent(agent)
    database = (lambda: tx.audit_lines(agent) or iter(())) \
        if tx.audit_lines(agent) is not None else None
    stats = Scan()
    imports: dict[str, tuple[int, str]] = {}
    try:
        found = _first_pass(path, agent, record, stats, imports, progress)
    except LogProblem as exc:
        return Report(False, str(exc)), None
    epochs: frozenset[str] = frozenset()
    committed_ts: Any = None
    if database is not None:  # one pass over the database's copy
        seen: set[str] = set()
        last = None if record is None else (record.epoch, record.next_seq - 1)
        for line in database():
            seen.add(line.get("epoch", ""))
            note_import(imports, line)
            if last is not None and (line.get("epoch", ""), line.get("seq")) == last:
                committed_ts = line.get("ts")
        epochs = frozenset(seen)
    note = ""
    try:
        if anchor and record is not None:
            note = _check_anchor(found, record, committed_ts, database is not None)
        segments = lineage("" if record is None else record.epoch, imports)
        result = Replay(agent)
        for logged in history_lines(path, agent, segments, database, epochs, progress):
            if logged.where.startswith("database"):
                logged.line.setdefault("prev", None)
            result.feed(logged)
        result.finish(None if record is None else record.next_seq, record is not None)
        compare(result, tx, agent)
    except LogProblem as exc:
        legacy_note = (f" ({found.legacy} of the agent's lines were written by an older "
                       "rotifer without seq or hash chain and were taken as written)"
                       ) if found.legacy else ""
        return Report(False, f"{exc}{legacy_note}", legacy=stats.legacy), None
    entries = len(result.state)
    summary = (f"agent {agent!r}: {counted(result.changes, 'committed change')}, "
               f"{counted(result.lines, 'line')}, {counted(entries, 'entry', 'entries')} "
               f"{'agrees' if entries == 1 else 'agree'} with the store; hash chain intact "
               f"over {counted(stats.lines, 'line')}{note}")
    if stats.legacy:
        summary += (f" ({stats.legacy} older lines without seq or chain, from a rotifer before "
                    "0.x, taken as written)")
    return Report(True, summary, result.changes, result.lines, stats.legacy,
                  phantoms=[seq for _, seq in result.phantoms],
                  index_rows=_index_rows(agent, found.places, result)), result


def _index_rows(agent: str, places: list[tuple[Entry, Any]], result: Replay
                ) -> list[tuple[Any, ...]]:
    """The rows the index holds for ``agent``: every line of it in the log but
    those of changes found never committed (as appending would have left them)."""
    phantoms = result.phantom_changes
    return [(agent, *entry) for entry, ts in places
            if not (phantoms and entry.seq is not None and entry.action != ROLLED_BACK
                    and (entry.epoch, entry.seq, ts) in phantoms)]


def _local_phantoms(path: Path, agent: str, epoch: str,
                    database: Iterator[dict[str, Any]], next_seq: int) -> list[tuple[str, int]]:
    """With a backend that keeps the committed lines: this worker's changes of the
    memory ``epoch`` that are not among them (same seq and time) and have no
    ``rolled_back`` line.  Both are in number order: one merged pass."""
    committed = ((line.get("seq"), line.get("ts")) for line in database
                 if line.get("epoch", "") == epoch)
    current: tuple[Any, Any] | None = next(committed, None)
    found: dict[int, bool] = {}
    last: tuple[Any, Any] | None = None
    for logged in scan(path, agent, chain=False):
        line = logged.line
        seq = line.get("seq")
        if line.get("epoch", "") != epoch or not isinstance(seq, int):
            continue
        if line.get("action") == ROLLED_BACK:
            if seq in found:
                found[seq] = False
            continue
        if (seq, line.get("ts")) == last:
            continue  # the same change's next line
        last = (seq, line.get("ts"))
        while current is not None and isinstance(current[0], int) and current[0] < seq:
            current = next(committed, None)
        if current != last or seq >= next_seq:
            found[seq] = True
    return [(epoch, seq) for seq, missing in found.items() if missing]


def from_index(tx: Transaction, path: Path, agent: str, *, anchor: bool = True,
               links: bool = True, progress: Callable[[Scan], None] | None = None
               ) -> Report | None:
    """The report of :func:`.own.by_index` (``None``: read the whole log)."""
    checked = by_index(tx, path, agent, anchor=anchor, links=links, progress=progress)
    if checked is None:
        return None
    result = checked.result
    entries = len(result.state)
    linked = " and links to the line before it" if checked.links else ""
    source = "; its database copy replayed" if checked.kept else ""
    return Report(True, f"agent {agent!r}: {counted(result.changes, 'committed change')}, "
                  f"{counted(result.lines, 'line')}, {counted(entries, 'entry', 'entries')} "
                  f"{'agrees' if entries == 1 else 'agree'} with the store{source}; each of "
                  f"its {counted(checked.lines, 'line')} hashes to the digest the store "
                  f"committed with it{linked}{checked.note} (found by the history index; "
                  "--full checks the hash chain over the whole log)", result.changes,
                  result.lines)


def verify_agent(store: StoreParts, agent: str, *, repair: bool = True, anchor: bool = True,
                 progress: Callable[[Scan], None] | None = None, full: bool = False,
                 links: bool = True) -> Report:
    """Verify ``agent``'s log against ``store`` (see the module doc), holding the
    agent.  ``anchor=False`` skips the anchor check, ``links=False`` the link
    into each of the agent's lines (for tests that show what they catch); ``progress`` is told how far the passes over the log got.  Unless
    ``full``, the agent's own lines are checked by :func:`from_index` when its
    index allows; otherwise (or when that finds anything wrong) the whole log
    is read, and the index rebuilt from it."""
    path = store.audit.path
    if path is None:
        return Report(False, "this store keeps no audit log")
    # Reading a large log takes as long as it takes: each statement is bounded,
    # not the whole transaction (a deployer's command, like a move).
    with store.backend.long_running(), store.backend.write(agent) as tx:
        quick = None if full else from_index(tx, path, agent, anchor=anchor, links=links,
                                             progress=progress)
        if quick is not None:
            return quick
        report, result = verify(tx, path, agent, anchor=anchor, progress=progress)
        if report.ok and repair and result is not None:
            record = tx.get_agent(agent)
            kept = tx.audit_lines(agent)
            if kept is None:
                missing = result.unexplained()
            elif record is not None:
                missing = _local_phantoms(path, agent, record.epoch, kept, record.next_seq)
            else:
                missing = []
            now = format_time(store.clock.now_us())
            extra = [rolled_back_line(now, agent, seq, "found by audit verify: its process "
                                      "ended before the commit", epoch=epoch)
                     for epoch, seq in missing]
            if record is not None:
                # The history index, rebuilt from what was just read: whole again
                # after an import, a move, an upgrade or anything that left it stale.
                # (On PostgreSQL, from this worker's log: its readers take only the
                # import lines from it, and check each; see .index.)
                tx.set_indexed(agent, record.epoch, False, report.index_rows)
            if extra:
                placed: Placed = []
                store.audit.write(extra, placed=placed)
                tx.index_lines(rows_for(agent, placed))
                report.repaired = len(extra)
            if record is not None:
                tx.set_indexed(agent, record.epoch, is_simple(tx, path, agent, record))
    return report
