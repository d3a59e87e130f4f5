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
import json
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypeAlias

from ..clock import parse_time
from .actions import IMPORT_AGENT, ROLLED_BACK
from .index import (
    ACTION,
    CATEGORY,
    EPOCH,
    KEY_HASH,
    NBYTES,
    SEQ,
    TS_US,
    IndexRow,
    IndexStale,
    LineReader,
    key_hash,
)
from .lineage import Imports, find_imports, history_lines, lineage, note_import
from .read import Logged, LogProblem, Scan
from .replay import Replay

if TYPE_CHECKING:
    from ..backend import AgentRecord, Transaction
    from ..store import MemoryStore

__all__ = ["AuditLine", "audit_history"]

#: One audit line as written (without ``prev``): ``ts``, ``agent``, ``action``,
#: ``key``, ``category``, ``actor``, ``bytes``, ``entryId``, the action's own
#: fields, ``epoch`` and ``seq`` (see docs/reliability.md).
AuditLine: TypeAlias = dict[str, Any]

SPOOL_IN_MEMORY = 8 << 20
BLOCK = 1 << 16


def audit_history(store: MemoryStore, agent: str, *, key: str | None = None,
                  actor: str | None = None, since_us: int | None = None,
                  limit: int | None = None,
                  progress: Callable[[Scan], None] | None = None,
                  rolled_back: bool = False) -> Iterator[AuditLine]:
    """``agent``'s committed history, newest first (see the module doc).

    ``key``/``actor``: only lines about that key / by that actor (a gene's v2
    id, ``deployer``, ``retention``); ``since_us``: only lines at or after that
    time (microseconds since the epoch); ``limit``: at most that many (the
    newest).  ``progress`` is told how far the reading of the log got.
    ``rolled_back`` also keeps the lines that say a change did not commit (the
    change's own lines stay out): the console marks them."""
    matches = _Matches(limit)
    path = store.audit.path
    with store.backend.long_running(), store.backend.read() as tx:  # bounded per statement
        record = tx.get_agent(agent)
        database = (lambda: tx.audit_lines(agent) or iter(())) \
            if tx.audit_lines(agent) is not None else None
        if database is None:
            fast = _from_index(tx, path, agent, record, rolled_back)
            if fast is not None:
                try:
                    return iter(_newest(fast, key, actor, since_us, limit))
                except IndexStale:
                    pass  # a log file moved, renumbered or edited: read it all, as below
        found = None if database is None else _imports_from_index(tx, path, agent, record,
                                                                  database)
        imports, epochs = found or find_imports(path, agent, database)
        segments = lineage("" if record is None else record.epoch, imports)
        replay = Replay(agent)

        def keep(lines: list[Logged]) -> None:
            for logged in lines:
                if _wanted(logged.line, key, actor, since_us):
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


class _Indexed(NamedTuple):
    """An agent's history as the index gives it: its rows in log order, and the
    reader of their lines (open on the log's files until closed)."""

    rows: list[IndexRow]
    reader: LineReader


def usable_entries(tx: Transaction, agent: str, record: AgentRecord | None
                   ) -> list[IndexRow] | None:
    """The agent's index rows if they are its whole history up to the store's
    last committed change (see :mod:`.index`), else ``None``."""
    if record is None or tx.indexed_epoch(agent) != record.epoch:
        return None
    rows = tx.index_entries(agent)
    if record.next_seq > 1:
        epoch = record.epoch
        last = next((r[SEQ] for r in reversed(rows) if r[SEQ] is not None
                     and r[EPOCH] == epoch and r[ACTION] != ROLLED_BACK), None)
        if last != record.next_seq - 1:
            return None  # behind the store (or ahead of it): not to be trusted
    return rows


def _imports(rows: list[IndexRow], reader: LineReader) -> Imports:
    imports: Imports = {}
    for row in rows:
        if row[ACTION] == IMPORT_AGENT:
            note_import(imports, reader.line(row)[0])
    return imports


def kept_entries(rows: list[IndexRow], record: AgentRecord, reader: LineReader,
                 rolled_back: bool) -> list[IndexRow]:
    """The rows :func:`audit_history` shows, in log order: the lineage's lines,
    and the lines without ``seq`` that fall among them (as
    :func:`.lineage.history_lines` decides for a scan).  Every indexed change
    was committed, so no replay is needed to leave phantoms out."""
    wanted = {s.epoch: s.below for s in lineage(record.epoch, _imports(rows, reader))}
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


def _from_index(tx: Transaction, path: Path | None, agent: str, record: AgentRecord | None,
                rolled_back: bool) -> _Indexed | None:
    if path is None or record is None:
        return None
    rows = usable_entries(tx, agent, record)
    if rows is None:
        return None
    with LineReader(path, agent) as reader:
        try:
            kept = kept_entries(rows, record, reader, rolled_back)
        except IndexStale:
            return None
    return _Indexed(kept, LineReader(path, agent))


def _imports_from_index(tx: Transaction, path: Path | None, agent: str,
                        record: AgentRecord | None,
                        database: Callable[[], Iterator[dict[str, Any]]]
                        ) -> tuple[Imports, frozenset[str]] | None:
    """What :func:`.lineage.find_imports` finds, with the log's ``import_agent``
    lines found by the index instead of a scan of the log (a backend that keeps
    the committed lines itself reads the rest from there)."""
    rows = None if path is None else usable_entries(tx, agent, record)
    if rows is None or path is None:
        return None
    try:
        with LineReader(path, agent) as reader:
            imports = _imports(rows, reader)
    except IndexStale:
        return None
    epochs: set[str] = set()
    for line in database():
        epochs.add(line.get("epoch", ""))
        note_import(imports, line)
    return imports, frozenset(epochs)


def _newest(found: _Indexed, key: str | None, actor: str | None, since_us: int | None,
            limit: int | None) -> list[AuditLine]:
    """The newest matches first, reading only the lines that may match."""
    wanted_hash = key_hash(key) if key is not None else None
    out: list[AuditLine] = []
    with found.reader as reader:
        for row in reversed(found.rows):
            if limit is not None and len(out) >= limit:
                break
            if key is not None and row[KEY_HASH] != wanted_hash:
                continue
            if since_us is not None and row[TS_US] < since_us:
                continue
            line = reader.line(row)[0]
            if _wanted(line, key, actor, since_us):
                out.append({k: v for k, v in line.items() if k != "prev"})
    return out


#: One change of bytes for the chart: (time in µs, action, the key or its hash,
#: category, bytes) -- oldest first (see :func:`usage_steps`).
Step: TypeAlias = tuple[int, str, object, "str | None", int]


def usage_steps(store: MemoryStore, agent: str) -> list[Step]:
    """The committed lines of ``agent``'s history that the chart needs, oldest
    first: from the index's columns alone when it is usable (no line read but
    its imports'), else from :func:`audit_history`."""
    path = store.audit.path
    with store.backend.read() as tx:
        record = tx.get_agent(agent)
        # A backend that keeps the lines (PostgreSQL) is read as audit_history reads it.
        entries = usable_entries(tx, agent, record) if path is not None and \
            record is not None and tx.audit_lines(agent) is None else None
    if entries is not None and path is not None and record is not None:
        with LineReader(path, agent) as reader:
            try:
                kept = kept_entries(entries, record, reader, False)
            except IndexStale:
                kept = None
        if kept is not None:
            return [(r[TS_US], r[ACTION], r[KEY_HASH], r[CATEGORY], r[NBYTES]) for r in kept]
    out: list[Step] = []
    for line in audit_history(store, agent):
        try:
            at = parse_time(str(line.get("ts")))
        except ValueError:
            continue
        category, nbytes = line.get("category"), line.get("bytes")
        out.append((at, str(line.get("action")), line.get("key"),
                    category if isinstance(category, str) else None,
                    nbytes if isinstance(nbytes, int) else 0))
    out.reverse()
    return out


def _wanted(line: AuditLine, key: str | None, actor: str | None, since_us: int | None
            ) -> bool:
    if key is not None and line.get("key") != key:
        return False
    if actor is not None and line.get("actor") != actor:
        return False
    if since_us is not None:
        try:
            return parse_time(str(line.get("ts"))) >= since_us
        except ValueError:
            return False
    return True


class _Matches:
    """The lines to show, kept in bounded memory (see the module doc)."""

    def __init__(self, limit: int | None) -> None:
        self.newest: deque[AuditLine] | None = None if limit is None else deque(maxlen=limit)
        self.spool: IO[bytes] | None = None

    def add(self, line: AuditLine) -> None:
        if self.newest is not None:
            self.newest.append(line)
            return
        if self.spool is None:
            self.spool = tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY)  # noqa: SIM115
        self.spool.write(json.dumps(line, ensure_ascii=False).encode("utf-8", "surrogatepass")
                         + b"\n")

    def newest_first(self) -> Iterator[AuditLine]:
        if self.newest is not None:
            return reversed(self.newest)
        return _backwards(self.spool)


def _backwards(spool: IO[bytes] | None) -> Iterator[AuditLine]:
    """The spooled lines from the last to the first, a block at a time."""
    if spool is None:
        return
    with spool:
        end = spool.seek(0, os.SEEK_END)
        rest = b""
        while end > 0:
            start = max(0, end - BLOCK)
            spool.seek(start)
            data = spool.read(end - start) + rest
            end = start
            parts = data.split(b"\n")
            rest = parts[0] if start > 0 else b""
            for part in reversed(parts if start == 0 else parts[1:]):
                if part:
                    yield json.loads(part.decode("utf-8", "surrogatepass"))
