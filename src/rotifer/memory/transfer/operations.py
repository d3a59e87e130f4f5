"""Export, import and move: streamed in batches, all or nothing, verified.

Nothing here holds an agent in memory: rows are read a page at a time
(the backends page by 256), written or inserted, and forgotten; the audit
lines of a change go out in batches of :data:`LINES_PER_WRITE`, all of them
before the change commits.  Verification reads the stored agent back the same
way and compares counts, bytes and an order-free fingerprint of every entry's
checksum (:class:`~.document.EntrySet`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from ..audit import DEPLOYER, AuditLog
from ..audit.actions import EXPORT, IMPORT, IMPORT_AGENT
from ..audit.places import Placed
from ..audit.text import audit_line
from ..clock import format_time
from ..engine.changes import Change, index_outside, log_change, new_epoch, settle
from ..errors import AgentMemoryError, ErrorCode, invalid, storage
from ..model import Category, entry_id
from ..storage.backend import AgentRecord, Row, Transaction
from ..store import MemoryStore
from .checks import ExportChecker
from .document import (
    CARRIED,
    FORMAT,
    VERSION,
    Document,
    DocumentWriter,
    EntrySet,
    Progress,
    TransferReport,
    entry_record,
    from_mapping,
    open_document,
    unlink_quietly,
)

#: Audit lines appended per write(2) during a long change (all before its commit).
LINES_PER_WRITE: Final = 1000


def describe(store: MemoryStore) -> str:
    """``backend:where`` for messages and audit lines (never a password)."""
    backend = store.backend
    where = backend.location
    if backend.schema and backend.schema != "public":
        where += f" (schema {backend.schema})"
    return f"{backend.name}:{where}"


def _settings(record: AgentRecord) -> dict[str, Any]:
    return {"quotaBytes": record.quota_bytes, "dataPolicy": record.data_policy.to_json(),
            "nextSeq": record.next_seq}


def line(now_us: int, agent_id: str, action: str, key: str | None = None,
          category: Category | None = None, nbytes: int = 0, **extra: Any) -> dict[str, Any]:
    return audit_line(format_time(now_us), agent_id, action, key,
                      None if category is None else category.value, DEPLOYER, nbytes,
                      None if key is None else entry_id(agent_id, key), extra)


def audit_in_batches(store: MemoryStore, tx: Transaction, change: Change,
                     lines: Iterable[dict[str, Any]], mirror: AuditLog | None = None) -> str:
    """Log a long change's lines in batches, each carrying the change's ``epoch``
    and ``seq``: every batch goes to the backend's own copy (in ``tx``) and the
    log before the commit, as one change's lines always do (and, for a move into
    another project's store, to that project's log, ``mirror``, as well: see
    :func:`~.move.move_agent`).  Returns the last line's hash (the change's
    anchor, in the store's own log)."""
    assert change.agent_id is not None and change.seq is not None
    batch: list[dict[str, Any]] = []
    head = ""
    mirrored = False  # a batch went to the mirror: the next continues it
    for line in lines:
        if change.epoch:
            line["epoch"] = change.epoch
        line["seq"] = change.seq
        batch.append(line)
        if len(batch) >= LINES_PER_WRITE:
            head = log_change(tx, store.audit, change.agent_id, change.seq, batch, change)
            if mirror is not None:
                mirror.write(batch, continues=mirrored)
                mirrored = True
            batch = []
    if batch:
        head = log_change(tx, store.audit, change.agent_id, change.seq, batch, change)
        if mirror is not None:
            mirror.write(batch, continues=mirrored)
    return head


def write_in_batches(log: AuditLog, lines: Iterable[dict[str, Any]]) -> None:
    """Append ``lines`` to ``log`` :data:`LINES_PER_WRITE` at a time (chained; each
    batch after the first continues it: no rolled_back line goes between them)."""
    batch: list[dict[str, Any]] = []
    written = False
    for line in lines:
        batch.append(line)
        if len(batch) >= LINES_PER_WRITE:
            log.write(batch, continues=written)
            written = True
            batch = []
    log.write(batch, continues=written)


class Tally:
    """What the source side saw: carried, left behind, expired."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.counts = {c.value: 0 for c in Category}
        self.carried = 0
        self.total = 0
        self.left = 0
        self.left_bytes = 0

    def rows(self, tx: Transaction, agent_id: str, now_us: int, keep_cache: bool
             ) -> Iterator[tuple[str, Row]]:
        """("carry" | "leave" | "expired", row) for each of the agent's rows."""
        for row in tx.iter_newest(agent_id):
            if row.expires_us is not None and row.expires_us <= now_us:
                yield "expired", row
            elif row.category in CARRIED or keep_cache:
                if self.progress is not None:  # progress counts what is carried, only
                    self.progress.advance(1, row.size)
                self.counts[row.category.value] += 1
                self.carried += 1
                self.total += row.size
                yield "carry", row
            else:
                self.left += 1
                self.left_bytes += row.size
                yield "leave", row

    def tail(self, sha256: str) -> dict[str, Any]:
        return {"counts": dict(self.counts), "totalBytes": self.total,
                "leftBehind": {"count": self.left, "bytes": self.left_bytes}, "sha256": sha256}


def open_source(tx: Transaction, agent_id: str, progress: Progress | None,
                keep_cache: bool = True) -> AgentRecord:
    """The agent's record; the progress started with the entries and bytes that
    will be carried (without ``keep_cache``, the CACHE entries are not)."""
    record = tx.get_agent(agent_id)
    if record is None:
        raise AgentMemoryError(ErrorCode.NOT_FOUND, f"agent {agent_id!r} has no memory in this store")
    if progress is not None:
        entries, nbytes = tx.count(agent_id), record.used_bytes
        if not keep_cache:  # the cleanup index walks CACHE alone, without the values
            for brief in tx.iter_oldest(agent_id, Category.CACHE):
                entries -= 1
                nbytes -= brief.size
        progress.start(entries, nbytes)
    return record


def head_of(record: AgentRecord, keep_cache: bool, now_us: int, source: str) -> dict[str, Any]:
    head = {"format": FORMAT, "version": VERSION, "agent": record.agent_id,
            "exportedAt": format_time(now_us), "source": source, "keepCache": keep_cache,
            "settings": _settings(record)}
    if record.epoch:
        head["epoch"] = record.epoch
    return head


def report(tally: Tally, agent_id: str, sha256: str, source: str,
           destination: str) -> TransferReport:
    """The report of an export or a move, from what its source side counted."""
    return TransferReport(agent=agent_id, entries=tally.carried, bytes=tally.total,
                          sha256=sha256, counts=dict(tally.counts), left_behind=tally.left,
                          left_behind_bytes=tally.left_bytes, source=source,
                          destination=destination)


# -- export ---------------------------------------------------------------------


def export_agent(store: MemoryStore, agent_id: str, path: Path, *, keep_cache: bool = False,
                 progress: Progress | None = None, replace: bool = True,
                 spec: Mapping[str, Any] | None = None,
                 history: list[dict[str, Any]] | None = None) -> TransferReport:
    """Write ``agent_id``'s memory to ``path`` (a copy; the store keeps it).

    Streamed from one read snapshot to a file written aside and fsynced; then
    the ``export`` audit line is appended, then the file is renamed into
    place: it appears whole or not at all, and never without its audit line
    (if the line cannot be written, the file is removed and the call fails).
    An existing file at ``path`` is replaced, unless ``replace`` is False:
    then it is MEMORY_INVALID_INPUT, checked before anything is read and again
    when the file is put in place (a hard link, which never replaces; a file
    that appeared in the meantime makes the call fail after its audit line,
    which then names an export that did not happen: better than an export
    without its line).  The file is readable by its owner only: memory can
    hold personal data.  ``spec`` (a JSON object) is written in the head as
    ``spec``, carried and not read here (the agent's spec, for an import in
    another project); ``history`` (the agent's audit lines, oldest first) as
    ``history``, for an import into another project's log.
    """
    if not replace and os.path.lexists(path):
        raise invalid(f"{path} exists; an export does not replace a file")
    if store.has_agent(agent_id):
        store.purge_expired(agent_id)  # audited as ``expire``, as any read path does
    now = store.clock.now_us()
    path = Path(path)
    tally = Tally(progress)
    with store.backend.long_running(), store.backend.read() as tx:
        record = open_source(tx, agent_id, progress, keep_cache)
        head = head_of(record, keep_cache, now, describe(store))
        if spec is not None:
            head["spec"] = dict(spec)
        if history is not None:
            head["history"] = history
        writer = DocumentWriter(path, head)
        try:
            checker = ExportChecker(head_of(record, keep_cache, now, ""))
            for n, (what, row) in enumerate(tally.rows(tx, agent_id, now, keep_cache)):
                if what == "carry":
                    rec = entry_record(row)
                    checker.row(rec, n)  # what we write must be what an import accepts
                    writer.entry(rec)
            sha256 = checker.checksum.hexdigest()
            tmp = writer.close(tally.tail(sha256))
        except BaseException:
            writer.abort()
            raise
    try:
        placed: Placed = []
        store.audit.write([line(
            store.clock.now_us(), agent_id, EXPORT, nbytes=tally.total, entries=tally.carried,
            sha256=sha256, keepCache=keep_cache, leftBehind=tally.left, to=str(path))],
            placed=placed)
        index_outside(store.backend, agent_id, placed)
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    except FileExistsError:
        raise invalid(f"{path} exists; an export does not replace a file") from None
    except OSError as exc:
        raise storage(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        unlink_quietly(tmp)
        if progress is not None:
            progress.finish()
    return report(tally, agent_id, sha256, describe(store), str(path))


# -- import ---------------------------------------------------------------------


def verify(tx: Transaction, record: AgentRecord, expected: EntrySet) -> None:
    """Read the agent back and compare with what was meant to be stored: the
    settings, the count and bytes, and every entry, field by field (through
    its checksum as it would be exported now)."""
    agent_id = record.agent_id
    held = tx.get_agent(agent_id)
    # last_us is the time of the import itself, the epoch and the anchor the
    # destination's own: none of them part of what was exported.
    if held is None or held._replace(last_us=0, epoch="", head="") != \
            record._replace(last_us=0, epoch="", head=""):
        raise storage(f"verification failed: agent {agent_id!r}'s settings differ after copying")
    count, used = tx.count(agent_id), tx.sum_sizes(agent_id)
    if count != expected.count or used != record.used_bytes:
        raise storage(f"verification failed: agent {agent_id!r} holds {count} entries / "
                      f"{used} bytes, expected {expected.count} / {record.used_bytes}")
    stored = EntrySet()
    for row in tx.iter_newest(agent_id):
        stored.add(entry_record(row)["sha256"])
    if stored != expected:
        raise storage(f"verification failed: agent {agent_id!r}'s entries differ after copying")


def fill(store: MemoryStore, checker: ExportChecker, entries: Iterable[Any],
         tail: Callable[[], Mapping[str, Any]], origin: str, via: str,
         progress: Progress | None = None, doc: Document | None = None,
         history: list[dict[str, Any]] | None = None,
         mirror: tuple[AuditLog, Callable[[], Iterable[dict[str, Any]]]] | None = None
         ) -> AgentRecord:
    """Create the agent and its entries in one transaction, checked as they
    stream in, verified and audited before it commits.  ``tail()`` gives the
    document's closing fields once the entries are exhausted.  ``history``: the
    agent's earlier audit lines (carried by an export into another project's
    log), appended just before the import's own lines -- after every check and
    the verification, so an import refused on the way leaves none of them.
    ``mirror``: another project's log and the lines it gets before the import's
    own, which it gets too (a move into that project's store: see
    :func:`~.move.move_agent`), at the same point."""
    agent_id = checker.agent_id
    # A new memory of the agent: a new epoch, whose numbers continue the old one's.
    change = Change(agent_id, actor=DEPLOYER, epoch=new_epoch())
    try:
        with store.backend.long_running(), store.backend.write(agent_id) as tx:
            if tx.get_agent(agent_id) is not None:
                raise invalid(f"agent {agent_id!r} already has a memory in {describe(store)}; "
                              "nothing was changed (a move or import never merges)")
            tx.insert_agent(checker.empty_record()._replace(epoch=change.epoch))
            read = 0
            latest = 0
            for n, rec in enumerate(entries):
                row = checker.row(rec, n)
                latest = max(latest, row.updated_us)
                tx.put(row)
                if progress is not None:
                    done = (doc.read if doc is not None and doc.size is not None
                            else read + row.size)
                    progress.advance(1, done - read)
                    read = done
            if progress is not None and doc is not None and doc.size is not None:
                progress.advance(0, doc.read - read)  # the closing fields
            exported = checker.finish(tail())
            # The import is change number nextSeq of the agent (its lines carry
            # it), timed after every entry it brings; the next change is the one after.
            change.seq = exported.next_seq
            now = change.now_us = max(store.clock.now_us(), latest + 1)
            record = exported._replace(next_seq=exported.next_seq + 1, last_us=now,
                                       epoch=change.epoch)
            tx.update_agent(agent_id, record.used_bytes, record.next_seq, record.last_us, "")
            verify(tx, record, checker.entries)
            if history:
                store.audit.write(history)
            if mirror is not None:
                write_in_batches(mirror[0], mirror[1]())
            # previousEpoch: the memory whose history this one continues (audit.lineage).
            head = line(now, agent_id, IMPORT_AGENT, nbytes=record.used_bytes,
                        entries=checker.entries.count, sha256=checker.checksum.hexdigest(),
                        quotaBytes=record.quota_bytes, dataPolicy=record.data_policy.to_json(),
                        via=via, source=origin, previousEpoch=checker.epoch)
            lines = (line(now, agent_id, IMPORT, r.key, r.category, r.size,
                          createdBy=r.created_by, via=via) for r in tx.iter_newest(agent_id))
            # before the commit, as every change; then its anchor
            anchor = audit_in_batches(store, tx, change, _chain([head], lines),
                                      None if mirror is None else mirror[0])
            tx.update_agent(agent_id, record.used_bytes, record.next_seq, record.last_us, anchor)
    except BaseException as exc:
        settle(store.backend, store.audit, store.clock, change, exc)
        raise
    return record


def _chain(first: list[dict[str, Any]], rest: Iterable[dict[str, Any]]
           ) -> Iterator[dict[str, Any]]:
    yield from first
    yield from rest


def import_agent(store: MemoryStore, export: Mapping[str, Any] | Path, *,
                 quota_bytes: int | None = None, source: str | None = None,
                 progress: Progress | None = None,
                 history: list[dict[str, Any]] | None = None) -> TransferReport:
    """Create the agent in ``store`` from an export (a file path, or a document).

    All or nothing, in one write transaction: every entry is checked as it is
    read and inserted, the counts, totals and checksum at the end, then the
    agent is read back and verified before the commit; a failure anywhere
    rolls everything back.  The agent must not have a memory in ``store`` yet
    (MEMORY_INVALID_INPUT otherwise); an import never merges.  The file is
    left where it is.  ``history`` (audit lines, oldest first) goes into the
    log just before the import's own lines, once everything was checked (see
    :func:`fill`).
    """
    if isinstance(export, Path):
        with open_document(export) as doc:
            checker = ExportChecker(doc.head, quota_bytes=quota_bytes)
            origin = source or f"file:{export}"
            if progress is not None:
                progress.start(None, doc.size)
            fill(store, checker, doc.entries, lambda: doc.tail, origin, "file", progress, doc,
                 history)
    else:
        doc = from_mapping(export)
        checker = ExportChecker(doc.head, quota_bytes=quota_bytes)
        origin = source or str(doc.head.get("source"))
        fill(store, checker, doc.entries, lambda: doc.tail, origin, "file", progress,
             history=history)
    if progress is not None:
        progress.finish()
    return TransferReport(
        agent=checker.agent_id, entries=checker.entries.count, bytes=checker.total,
        sha256=checker.checksum.hexdigest(), counts=dict(checker.counts),
        left_behind=int(doc.tail.get("leftBehind", {}).get("count", 0)),
        left_behind_bytes=int(doc.tail.get("leftBehind", {}).get("bytes", 0)),
        source=origin, destination=describe(store))


def verify_import(store: MemoryStore, export: Mapping[str, Any], *,
                  quota_bytes: int | None = None) -> None:
    """Check that ``store`` holds exactly what ``export`` describes (else STORAGE_ERROR)."""
    doc = from_mapping(export)
    checker = ExportChecker(doc.head, quota_bytes=quota_bytes)
    for n, rec in enumerate(doc.entries):
        checker.row(rec, n)
    record = checker.finish(doc.tail)
    record = record._replace(next_seq=record.next_seq + 1)  # the import's own number
    with store.backend.long_running(), store.backend.read() as tx:
        verify(tx, record, checker.entries)
