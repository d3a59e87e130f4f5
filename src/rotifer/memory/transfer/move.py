"""Moving an agent between two open stores, all or nothing, in a stream."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..audit import DEPLOYER, AuditLog
from ..audit.actions import EXPIRE, MOVE, MOVE_DROP, MOVE_OUT, ROLLED_BACK
from ..audit.index import rows_for
from ..audit.places import Placed
from ..audit.text import rolled_back_line
from ..clock import format_time
from ..engine.changes import Change, settle
from ..errors import AgentMemoryError, ErrorCode, invalid, storage
from ..storage.backend import AgentRecord
from ..store import MemoryStore
from .checks import ExportChecker
from .document import Progress, TransferReport, entry_record
from .operations import (
    Tally,
    audit_in_batches,
    describe,
    fill,
    head_of,
    line,
    open_source,
    report,
    verify,
    write_in_batches,
)


def move_agent(source: MemoryStore, destination: MemoryStore, agent_id: str, *,
               keep_cache: bool = False, quota_bytes: int | None = None,
               progress: Progress | None = None, mirror: AuditLog | None = None,
               history: Iterable[dict[str, Any]] = (), source_mirror: AuditLog | None = None,
               source_history: Iterable[dict[str, Any]] = ()) -> TransferReport:
    """Move ``agent_id``'s memory from ``source`` to ``destination``.

    Both ends' lines go to ``source.audit`` and ``destination.audit`` (one log,
    when one project runs the move: the anchors are in it).  ``mirror`` is the
    log of the project whose store ``destination`` is, when that is another
    project: it gets ``history`` (the agent's earlier lines that it lacks, oldest
    first), the source's move lines and the destination's import lines, in the
    destination's transaction before its commit, chained in that log, so that
    project's log shows and verifies the move (see docs/backends.md).
    ``source_mirror`` likewise is the log of the project whose store ``source``
    is, when that is another project (a move *out* of it): it gets
    ``source_history`` (the agent's lines it lacks: its changes since it was
    moved in) and the move's lines, in the source's transaction once the copy
    is verified, before the source's commit.

    How it stays all-or-nothing across two databases:

    1. The source agent is held exclusively (a write transaction) for the whole
       move, so no gene can change it in between; a gene call waiting on it
       afterwards finds no memory there (MEMORY_STORAGE_ERROR) and the caller
       re-binds the agent to the destination.
    2. The destination gets the agent in one transaction, fed page by page
       from the source and checked entry by entry as an import would be,
       verified before it commits, then verified again by a fresh read after
       the commit.
    3. Only then are the source's ``move`` lines audited and the agent removed
       from the source, in the transaction held since step 1.
    4. If anything fails after step 2 committed, the copy is removed from the
       destination again (audited there as ``drop_agent``) -- but only if the
       source verifiably still has the agent.  If the source no longer has it
       (its commit went through though it reported an error), the move did
       happen and is reported as done.  If the source cannot be checked at
       all, the copy stays, because two copies can be cleaned up and none
       cannot; the error says so.

    CACHE entries are not carried unless ``keep_cache``; they are removed with
    the rest of the source's memory (audited as ``move_drop``).  ``quota_bytes``
    gives the agent a different quota at the destination.
    """
    if not source.has_agent(agent_id):
        raise AgentMemoryError(ErrorCode.NOT_FOUND, f"agent {agent_id!r} has no memory in "
                          f"{describe(source)}")
    if destination is source:
        raise invalid(f"agent {agent_id!r} already has a memory in {describe(destination)}; "
                      "nothing was moved (a move or import never merges)")
    there = destination.has_agent(agent_id)
    rolled: list[dict[str, Any]] = []
    source.purge_expired(agent_id)
    src, dst = describe(source), describe(destination)
    copied = told = False
    now = 0
    sha256 = ""
    tally = Tally(None)
    change = Change(agent_id, actor=DEPLOYER, removes_agent=True)
    try:
        with source.backend.long_running(), source.backend.write(agent_id) as tx:
            held = open_source(tx, agent_id, progress, keep_cache)
            now = change.now_us = max(source.clock.now_us(), held.last_us + 1)
            # The move is the source's change N; the destination's import is N + 1,
            # in a new epoch that names this one: one history across both stores.
            change.seq, change.epoch = held.next_seq, held.epoch
            record = held._replace(next_seq=held.next_seq + 1)
            head = head_of(record, keep_cache, now, src)
            # What goes, and its checksum, first: the source's lines (change N) are
            # appended before the destination's (N + 1), so the log is in order.
            summary = ExportChecker(head, quota_bytes=quota_bytes)
            for n, row in enumerate(r for what, r in tally.rows(tx, agent_id, now, keep_cache)
                                    if what == "carry"):
                summary.row(entry_record(row), n)
            sha256 = summary.checksum.hexdigest()
            expected = summary.finish(tally.tail(sha256))  # a quota they do not fit: no line
            if there:
                _drop_orphan(destination, agent_id, expected._replace(
                    next_seq=record.next_seq + 1), summary)
                # That earlier move's lines (change N, never committed: the source
                # still has N to give) get their rolled_back line now, before this
                # move's: one appended later, after these, would name this one too.
                if not _said_rolled_back(source, agent_id, change):
                    placed: Placed = []
                    rolled.append(rolled_back_line(
                        format_time(now), agent_id, change.seq, "its move was cut off after "
                        "the copy committed; the copy was removed and the move run again",
                        epoch=change.epoch))
                    source.audit.write(rolled, placed=placed)
                    tx.index_lines(rows_for(agent_id, placed))

            def lines() -> Iterator[dict[str, Any]]:
                yield line(now, agent_id, MOVE, nbytes=tally.total, entries=tally.carried,
                           sha256=sha256, keepCache=keep_cache, leftBehind=tally.left, to=dst)
                # In the order of the log's contract: carried, left behind, expired.
                expired = []
                for what, r in Tally(None).rows(tx, agent_id, now, keep_cache):
                    if what == "carry":
                        yield line(now, agent_id, MOVE_OUT, r.key, r.category, r.size,
                                   createdBy=r.created_by, to=dst)
                    elif what == "expired":  # rare: expired entries were purged just before
                        expired.append(line(now, agent_id, EXPIRE, r.key, r.category,
                                            r.size, actor="retention", createdBy=r.created_by))
                for what, r in Tally(None).rows(tx, agent_id, now, keep_cache):
                    if what == "leave":
                        yield line(now, agent_id, MOVE_DROP, r.key, r.category, r.size,
                                   createdBy=r.created_by)
                yield from expired

            audit_in_batches(source, tx, change, lines())

            def mirrored(earlier: Iterable[dict[str, Any]] = history
                         ) -> Iterator[dict[str, Any]]:
                """What the destination project's log gets before the import (and
                the source project's, with its own ``earlier`` lines)."""
                yield from earlier
                if there:  # as in the source's log
                    yield from (dict(x) for x in rolled)
                for moved_line in lines():  # the move's lines again, numbered as logged
                    if change.epoch:
                        moved_line["epoch"] = change.epoch
                    moved_line["seq"] = change.seq
                    yield moved_line

            copying = Tally(progress)
            checker = ExportChecker(head, quota_bytes=quota_bytes)
            carried = (entry_record(row) for what, row in
                       copying.rows(tx, agent_id, now, keep_cache) if what == "carry")
            moved = fill(destination, checker, carried,
                         lambda: copying.tail(checker.checksum.hexdigest()), f"move:{src}",
                         "move", mirror=None if mirror is None else (mirror, mirrored))
            copied = True
            if checker.checksum.hexdigest() != sha256:
                raise storage(f"moving {agent_id!r}: the entries changed while they were copied")
            with destination.backend.long_running(), destination.backend.read() as dtx:
                verify(dtx, moved, checker.entries)
            if source_mirror is not None:
                told = True
                write_in_batches(source_mirror, mirrored(source_history))
            tx.delete_agent(agent_id)
    except BaseException as exc:  # an interrupt after the copy must not leave two copies
        settle(source.backend, source.audit, source.clock, change, exc)
        if told and source_mirror is not None:
            _settle_mirror(source, source_mirror, change, now)
        done = copied and _undo_copy(source, destination, agent_id, exc)
        if not done or not isinstance(exc, Exception):
            raise
    finally:
        if progress is not None:
            progress.finish()
    return report(tally, agent_id, sha256, src, dst)


def _settle_mirror(source: MemoryStore, mirror: AuditLog, change: Change, now: int) -> None:
    """The move's lines went to the source project's log too, and the move failed:
    if the source still has the agent (the move did not commit), that log gets
    their ``rolled_back`` line as well, written holding the agent (a move run
    again meanwhile would put its lines first).  Best effort: a move run again
    writes it before its own lines there (see :mod:`..audit.pending`)."""
    if change.seq is None or change.agent_id is None:
        return
    agent_id = change.agent_id
    try:
        with source.backend.write(agent_id) as tx:
            record = tx.get_agent(agent_id)
            if record is None or record.next_seq != change.seq:
                return  # the move committed after all (or the agent changed since)
            mirror.write([rolled_back_line(format_time(max(now, source.clock.now_us())),
                                           agent_id, change.seq,
                                           "its move was cut off; it did not commit",
                                           DEPLOYER, change.epoch)])
    except Exception:
        pass


def _said_rolled_back(source: MemoryStore, agent_id: str, change: Change) -> bool:
    """Does the source's log say already (``audit verify`` ran since) that the last
    logged change ``change.seq`` of the source's memory was rolled back?"""
    from ..audit.read import LogProblem, scan

    if source.audit.path is None:
        return True
    last = ""
    try:
        for logged in scan(source.audit.path, agent_id, chain=False):
            line = logged.line
            if line.get("seq") == change.seq and line.get("epoch", "") == change.epoch:
                last = str(line.get("action"))
    except LogProblem:
        return False
    return last == ROLLED_BACK


def _drop_orphan(destination: MemoryStore, agent_id: str, expected: AgentRecord,
                 summary: ExportChecker) -> None:
    """The destination has a memory of the agent already.  If it is exactly the
    copy this move would make now -- same settings, entries and numbers, changed
    by nothing since its import: the copy of an earlier move of this very state
    that was killed after the copy committed and before the source dropped the
    agent -- remove it (audited there as ``drop_agent``) and move again, so the
    retried move ends as if the first had never been.  Anything else is refused:
    an import or move never merges or overwrites."""
    try:
        with destination.backend.long_running(), destination.backend.read() as dtx:
            verify(dtx, expected, summary.entries)
    except AgentMemoryError:
        raise invalid(f"agent {agent_id!r} already has a memory in {describe(destination)}; "
                      "nothing was moved (remove it there first if it must go)") from None
    destination.drop_agent(agent_id)


def _undo_copy(source: MemoryStore, destination: MemoryStore, agent_id: str,
               cause: BaseException) -> bool:
    """After a failure once the copy committed: remove the copy, unless the
    source is gone (then return True: the move happened after all)."""
    try:
        still_there = source.has_agent(agent_id)
    except Exception as exc:
        raise storage(
            f"moving {agent_id!r} failed ({cause}) and {describe(source)} cannot be checked "
            f"({exc}); the copy in {describe(destination)} is kept -- check both and remove "
            f"one of them (`rotifer agent delete {agent_id} --store URL` removes the one "
            "at URL)") from cause
    if not still_there:
        return True
    try:
        destination.drop_agent(agent_id)
    except Exception as exc:
        raise storage(
            f"moving {agent_id!r} failed ({cause}) and its copy in {describe(destination)} "
            f"could not be removed ({exc}): the agent is now in both places (`rotifer agent "
            f"delete {agent_id} --store URL` removes the copy at URL)") from cause
    return False
