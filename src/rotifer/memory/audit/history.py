"""An agent's audit history, newest first, in a stream: ``rotifer agent audit show``.

:func:`audit_history` is the public way to read what happened to an agent's
memory (the CLI's ``audit show`` and the web console use it): an iterator of
audit lines -- dicts as written, without ``prev``, never a value (no line
holds one) -- newest first, filtered by key, actor and time, at most
``limit`` of them.

It shows the agent's whole history across every store it has lived in (see
:mod:`rotifer.memory.audit.lineage`), committed changes only (a change that
never committed, and ``rolled_back`` lines, are left out), plus refusals
made before any change.  The log is read in a stream, oldest first, through
the same decisions ``audit verify`` makes (:class:`~.replay.Replay`);
memory stays bounded whatever the log's size: with ``limit`` only the newest
``limit`` matches are kept (a bounded deque); without one, matches are
spooled to a temporary file (in memory up to 8 MiB) and read back from its
end, a block at a time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias, cast

from ..clock import parse_time
from ..storage.index_sql import IndexRow
from .actions import IMPORT_AGENT, ROLLED_BACK, step_code
from .index import (
    ACTION,
    CATEGORY,
    END,
    EPOCH,
    KEY_HASH,
    NBYTES,
    SEQ,
    TS_US,
    IndexStale,
    LineReader,
    key_hash,
)
from .lineage import Imports, find_imports, history_lines, lineage, memory_end, note_import
from .read import Logged, LogProblem, Scan
from .replay import Replay
from .spool import Matches

if TYPE_CHECKING:
    from ..clock import Clock
    from ..storage.backend import AgentRecord, Backend, Transaction
    from .log import AuditLog

__all__ = ["AuditLine", "StoreParts", "audit_history"]


class StoreParts(Protocol):
    """What the readers (this module, :mod:`.verify`) use of a store: its
    backend, audit log and clock -- a :class:`~rotifer.memory.store.MemoryStore`
    is one (the audit room sits below the store and does not import it)."""

    @property
    def backend(self) -> Backend: ...

    @property
    def audit(self) -> AuditLog: ...

    @property
    def clock(self) -> Clock: ...

#: One audit line as written (without ``prev``): ``ts``, ``agent``, ``action``,
#: ``key``, ``category``, ``actor``, ``bytes``, ``entryId``, the action's own
#: fields, ``epoch`` and ``seq`` (see docs/reliability.md).
AuditLine: TypeAlias = dict[str, Any]

def _dropped_epoch(path: Any, agent: str) -> str:
    """The epoch of the memory the agent's last ``drop_agent`` line removed, or
    its last ``move`` took out of this project's store (``""``: none): where a
    deleted agent's history ends, or a history this project's store held until
    another project moved the memory out of it (see :func:`.lineage.memory_end`)."""
    ended = memory_end(path, agent)
    return "" if ended is None else ended[1]


def audit_history(store: StoreParts, agent: str, *, key: str | None = None,
                  actor: str | None = None, since_us: int | None = None,
                  limit: int | None = None,
                  progress: Callable[[Scan], None] | None = None,
                  rolled_back: bool = False, until_us: int | None = None
                  ) -> Iterator[AuditLine]:
    """``agent``'s committed history, newest first (see the module doc).

    ``key``/``actor``: only lines about that key / by that actor (a gene's v2
    id, ``deployer``, ``retention``); ``since_us``: only lines at or after that
    time (microseconds since the epoch), ``until_us`` before that time;
    ``limit``: at most that many (the newest).  ``progress`` is told how far the reading of the log got.
    ``rolled_back`` also keeps the lines that say a change did not commit (the
    change's own lines stay out): the console marks them."""
    matches = Matches(limit)
    wanted = Filters(key, actor, since_us, until_us)
    path = store.audit.path
    with store.backend.long_running(), store.backend.read() as tx:  # bounded per statement
        record = tx.get_agent(agent)
        database = (lambda: tx.audit_lines(agent) or iter(())) \
            if tx.audit_lines(agent) is not None else None
        if database is None and path is not None:
            chosen = plan(tx, path, agent, record)
            if chosen is not None:
                try:
                    return iter(_newest(tx, path, agent, chosen, wanted, limit, rolled_back,
                                        progress))
                except IndexStale:
                    pass  # a log file moved, renumbered or edited: read it all, as below
        found = None if database is None else _imports_from_index(tx, path, agent, record,
                                                                  database)
        imports, epochs = found or find_imports(path, agent, database)
        # A deleted agent has no record: its history is that of the memory its
        # last drop_agent line removed (`audit show` of a deleted agent).
        segments = lineage(_dropped_epoch(path, agent) if record is None else record.epoch,
                           imports)
        replay = Replay(agent)

        def keep(lines: list[Logged]) -> None:
            for logged in lines:
                if wanted.wants(logged.line):
                    matches.add({k: v for k, v in logged.line.items() if k != "prev"})

        try:
            for logged in history_lines(path, agent, segments, database, epochs, progress):
                if rolled_back and logged.line.get("action") == ROLLED_BACK:
                    keep([logged])
                keep(replay.feed(logged))
            keep(replay.finish(None if record is None else record.next_seq,
                               record is not None))
        except LogProblem:  # verify names it; show what could be read
            # (the change it stopped in may not replay either)
            with contextlib.suppress(LogProblem):
                keep(replay.finish(None, False))
    return matches.newest_first()


class Plan(NamedTuple):
    """How the index gives an agent's history: its lineage (epoch -> the number
    its lines stay below), and whether every numbered row is in it (``simple``:
    then every row is the history's, and SQL picks a page; else the rows are
    walked as :func:`.lineage.history_lines` walks a scan)."""

    wanted: dict[str, int | None]
    simple: bool


def plan(tx: Transaction, path: Path | None, agent: str, record: AgentRecord | None
         ) -> Plan | None:
    """The :class:`Plan` if the index's rows are the agent's whole history up
    to the store's last committed change (see :mod:`.index`), else ``None``."""
    marker = None if path is None or record is None else tx.indexed(agent)
    if marker is None or record is None or path is None or marker[0] != record.epoch:
        return None
    if marker[1]:  # every numbered row is the current memory's: no walk, no lineage
        if record.next_seq > 1 and tx.index_last_committed(agent) != record.next_seq - 1:
            return None  # behind the store (or ahead of it): not to be trusted
        return Plan({}, True)
    summary = tx.index_summary(agent)
    last = next((committed for epoch, committed, _ in summary if epoch == record.epoch), None)
    if record.next_seq > 1 and last != record.next_seq - 1:
        return None  # behind the store (or ahead of it): not to be trusted
    return _lineage_plan(tx, path, agent, record, summary)


def _lineage_plan(tx: Transaction, path: Path, agent: str, record: AgentRecord,
                  summary: list[tuple[Any, ...]]) -> Plan | None:
    """The lineage the index's import rows give, and whether every numbered row
    lies in it (None: a row's line is not where the index says)."""
    try:
        with LineReader(path, agent) as reader:
            imports: Imports = {}
            for row in tx.index_of_action(agent, IMPORT_AGENT):
                note_import(imports, reader.line(row)[0])
    except IndexStale:
        return None
    wanted = {s.epoch: s.below for s in lineage(record.epoch, imports)}
    simple = all(epoch in wanted and ((below := wanted[epoch]) is None or newest < below)
                 for epoch, _, newest in summary)
    return Plan(wanted, simple)


def is_simple(tx: Transaction, path: Path, agent: str, record: AgentRecord) -> bool:
    """Are all of the agent's numbered rows its lineage's (for the marker)?"""
    found = _lineage_plan(tx, path, agent, record, tx.index_summary(agent))
    return found is not None and found.simple


def usable_entries(tx: Transaction, path: Path | None, agent: str,
                   record: AgentRecord | None) -> list[IndexRow] | None:
    """The agent's index rows if they are its whole history (:func:`plan`, the
    log at ``path``), else ``None``."""
    return None if plan(tx, path, agent, record) is None else tx.index_entries(agent)


def kept_entries(rows: list[IndexRow], wanted: dict[str, int | None],
                 rolled_back: bool) -> list[IndexRow]:
    """The rows :func:`audit_history` shows, in log order, for a lineage whose
    rows are not all the history's: the lineage's lines, and the lines without
    ``seq`` that fall among them (as :func:`.lineage.history_lines` decides for
    a scan).  Every indexed change was committed, so no replay is needed to
    leave phantoms out."""
    inside = True
    out = []
    for row in rows:
        seq = row[SEQ]
        if seq is None:
            if inside:
                out.append(row)
            continue
        epoch = row[EPOCH]
        inside = epoch in wanted and ((below := wanted[epoch]) is None or seq < below)
        if inside and (rolled_back or row[ACTION] != ROLLED_BACK):
            out.append(row)
    return out


class Filters(NamedTuple):
    """What :func:`audit_history` keeps: a key, an actor, a time window (µs)."""

    key: str | None = None
    actor: str | None = None
    since_us: int | None = None
    until_us: int | None = None

    def wants(self, line: AuditLine) -> bool:
        if self.key is not None and line.get("key") != self.key:
            return False
        if self.actor is not None and line.get("actor") != self.actor:
            return False
        if self.since_us is not None or self.until_us is not None:
            try:
                at = parse_time(str(line.get("ts")))
            except ValueError:
                return False
            return (self.since_us is None or at >= self.since_us) and \
                (self.until_us is None or at < self.until_us)
        return True


def _newest(tx: Transaction, path: Path, agent: str, found: Plan, wanted: Filters,
            limit: int | None, rolled_back: bool,
            progress: Callable[[Scan], None] | None = None) -> list[AuditLine]:
    """The newest matches first, reading only the lines that may match: a page
    of rows at a time chosen by SQL (``simple``), else from the walked rows.
    ``progress`` is told once, at the end, the lines and bytes read."""
    with LineReader(path, agent) as reader:
        out = _pick(tx, reader, agent, found, wanted, limit, rolled_back)
        if progress is not None:
            progress(Scan(lines=reader.lines_read, done=reader.bytes_read,
                          total=reader.bytes_read))
    return out


def _pick(tx: Transaction, reader: LineReader, agent: str, found: Plan, wanted: Filters,
          limit: int | None, rolled_back: bool) -> list[AuditLine]:
    wanted_hash = key_hash(wanted.key) if wanted.key is not None else None
    since = -(1 << 62) if wanted.since_us is None else wanted.since_us
    until = 1 << 62 if wanted.until_us is None else wanted.until_us
    out: list[AuditLine] = []
    batch = max(64, min(limit or 1000, 1000))
    if found.simple:
        before = END
        while True:
            rows = tx.index_page(agent, before, since, until,
                                 "" if rolled_back else ROLLED_BACK, wanted_hash, batch)
            if _take(reader, rows, out, wanted, limit) or len(rows) < batch:
                return out
            before = (rows[-1][0], rows[-1][1])
    rows = kept_entries(tx.index_entries(agent), found.wanted, rolled_back)
    picked = [r for r in reversed(rows) if (wanted.key is None or r[KEY_HASH] == wanted_hash)
              and since <= r[TS_US] < until]
    _take(reader, picked, out, wanted, limit)
    return out


def _take(reader: LineReader, rows: list[IndexRow], out: list[AuditLine], wanted: Filters,
          limit: int | None) -> bool:
    """Add the lines of ``rows`` that match to ``out``; whether ``limit`` is
    reached.  Read as many at a time as may still be shown (adjacent places in
    one read: :meth:`.index.LineReader.lines_at`), never beyond ``rows``."""
    at = 0
    while at < len(rows):
        if limit is not None and len(out) >= limit:
            return True
        take = len(rows) - at if limit is None else max(limit - len(out), 16)
        for line in reader.lines_at(rows[at:at + take]):
            if limit is not None and len(out) >= limit:
                return True
            if wanted.wants(line):
                line.pop("prev", None)
                out.append(line)
        at += take
    return limit is not None and len(out) >= limit


def _imports_from_index(tx: Transaction, path: Path | None, agent: str,
                        record: AgentRecord | None,
                        database: Callable[[], Iterator[dict[str, Any]]]
                        ) -> tuple[Imports, frozenset[str]] | None:
    """What :func:`.lineage.find_imports` finds, with the log's ``import_agent``
    lines found by the index instead of a scan of the log (a backend that keeps
    the committed lines itself reads the rest from there)."""
    if plan(tx, path, agent, record) is None or path is None:
        return None
    imports: Imports = {}
    try:
        with LineReader(path, agent) as reader:
            for row in tx.index_of_action(agent, IMPORT_AGENT):
                note_import(imports, reader.line(row)[0])
    except IndexStale:
        return None
    epochs: set[str] = set()
    for line in database():
        epochs.add(line.get("epoch", ""))
        note_import(imports, line)
    return imports, frozenset(epochs)


#: One change of bytes for the chart: (time in µs, :func:`.actions.step_code`, the
#: key or its hash, bytes) -- oldest first (see :func:`usage_steps`).
Step: TypeAlias = tuple[int, int, object, int]


def step_of(at: int, action: object, key: object, category: object, size: object
            ) -> Step | None:
    """The chart's step of a line (``None``: a line that changes no bytes)."""
    code = step_code(action, category)
    if code is None:
        return None
    return (at, code, key, size if isinstance(size, int) and not isinstance(size, bool)
            else 0)


def usage_steps(store: StoreParts, agent: str) -> list[Step]:
    """The committed lines of ``agent``'s history that the chart follows (the
    actions of :data:`.actions.CHART_ACTIONS`), oldest first: from the index's
    columns alone when it is usable (no line read but its imports'), else from
    :func:`audit_history`."""
    path = store.audit.path
    with store.backend.read() as tx:
        record = tx.get_agent(agent)
        # A backend that keeps the lines (PostgreSQL) is read as audit_history reads it.
        found = plan(tx, path, agent, record) if tx.audit_lines(agent) is None else None
        if found is not None and found.simple:
            return cast("list[Step]", tx.index_steps(agent))  # rows of a Step's columns
        if found is not None:
            kept = (step_of(r[TS_US], r[ACTION], r[KEY_HASH], r[CATEGORY], r[NBYTES])
                    for r in kept_entries(tx.index_entries(agent), found.wanted, False))
            return [step for step in kept if step is not None]
    out: list[Step] = []
    for line in audit_history(store, agent):
        try:
            at = parse_time(str(line.get("ts")))
        except ValueError:
            continue
        step = step_of(at, line.get("action"), line.get("key"), line.get("category"),
                       line.get("bytes"))
        if step is not None:
            out.append(step)
    out.reverse()
    return out
