"""One change of an agent's memory: its time, its number, its audit lines.

Every change runs in one backend write transaction that holds the agent
exclusively, and everything that makes it true is decided *inside* that
transaction:

* Its time.  The clock is read after the lock is taken, and the change gets
  ``max(clock, last_us + 1)``, where ``last_us`` (on the agent's row) is the
  time of the agent's previous committed change.  So ``updatedAt``,
  ``createdAt`` and the audit ``ts`` strictly increase per agent in commit
  order, even when the clock steps back or two changes fall in one
  microsecond -- and the rules that order by ``updatedAt`` (cleanup oldest
  first, query newest first, ``since``) follow the order changes were made.
* Its number, ``seq``: the agent's ``next_seq`` when the change began.  Every
  change that writes audit lines commits ``next_seq = seq + 1`` and
  ``last_us = ts`` with its one ``update_agent`` statement, so committed
  changes of an agent are numbered 1, 2, 3, ... without gaps, an entry's
  write-order number is the seq of the change that last wrote it, and "was
  change N committed?" is answered by the store alone: ``next_seq > N``.
  A call that writes no line (a read that only notes ``lastAccessedBy``)
  takes no number.
* Its anchor.  The hash of the change's last audit line (which links, through
  the log's hash chain, every line before it) is committed with the change as
  the agent's ``head``, by the same ``update_agent`` statement: it runs just
  after the append, still before the commit.  ``audit verify`` checks that the
  log's chain ends where the store says (see :mod:`rotifer.memory.audit.verify`).
* Its audit lines, appended before the commit (write-ahead).  If the
  transaction then does not commit -- an exception, a deadline or Ctrl-C
  landing anywhere, a commit that fails, a lost connection -- the caller
  asks the store whether seq N was committed (never guessing from where the
  exception came from: an interrupt raised just after ``COMMIT`` returned is
  a committed change) and, if not, appends a ``rolled_back`` line naming N
  before the exception goes on.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..audit import AuditLog, encode_lines, rolled_back_line
from ..audit.actions import ACCESS_DENIED, QUOTA_EXCEEDED
from ..audit.index import IndexRun, key_hashes, rows_for, rows_with, str_key_hash
from ..audit.places import Placed, Places
from ..audit.text import HEAD, BriefTemplate, audit_line, line_text
from ..clock import Clock, format_time
from ..context import AUDIT_CONTEXT
from ..errors import AgentMemoryError, ErrorCode
from ..model import Category, MemoryEntry, entry_id, entry_ids, stored_entry
from ..storage.backend import Backend, Brief, Row, Transaction

HEAD_FIELDS = frozenset(HEAD)
#: Times from 1970 to the year 10,000 (exclusive) in microseconds: ``format_time``
#: writes them as ``parse_time`` reads them back, to the microsecond.
_YEAR_10000_US = 253_402_300_800_000_000
#: Each category's name (``Category.value`` is a property: a call on every read).
_VALUES = {c: c.value for c in Category}


def new_epoch() -> str:
    """A new agent memory's epoch: 48 random bits as 12 hex digits (so two
    memories of one agent in one log practically never share one)."""
    return os.urandom(6).hex()  # secrets.token_hex's own source; speed: secrets imports random, hmac


def to_entry(row: Row, last_accessed_by: str | None = None) -> MemoryEntry:
    return stored_entry(
        entry_id(row.agent_id, row.key), row.category, row.key, row.value, row.created_by,
        last_accessed_by or row.last_accessed_by, format_time(row.created_us),
        format_time(row.updated_us), row.access, row.retention,
    )


@dataclass
class Change:
    """What one write transaction will do: audit lines first, then the change."""

    agent_id: str | None
    #: The change's time, set once it holds the agent (:meth:`Engine.begin
    #: <rotifer.memory.engine.core.Engine.begin>`), or given for a refusal.
    now_us: int = 0
    actor: str | None = None
    #: The agent's change number (``None`` outside an agent's transaction).
    seq: int | None = None
    #: The agent's epoch (its row's; ``""`` for an agent made before epochs were):
    #: every line of the change carries it, next to ``seq``.
    epoch: str = ""
    lines: list[dict[str, Any]] = field(default_factory=list)
    #: Each line as JSON (``texts[i]`` encodes ``lines[i]``), made with it.
    texts: list[str] = field(default_factory=list)
    #: The history index's columns of runs of ``lines`` the change made with
    #: them (:meth:`brief_lines`), in order: see :func:`log_change`.
    index_runs: list[IndexRun] = field(default_factory=list)
    error: AgentMemoryError | None = None
    #: The entry under the call's key as stored when the transaction began
    #: (after the expiry purge), so the body need not read it again.
    row: Row | None = None
    #: The agent's byte total after the change (the body sets it when it changes).
    used: int = 0
    #: Set just before the lines are appended: from then on, a failure must be
    #: settled (committed or not?) and a rolled_back line written if not.
    logged: bool = False
    #: Set once the append returned: the lines are certainly in the log.
    appended: bool = False
    #: The change removes the agent (committed iff the agent is gone).
    removes_agent: bool = False

    def line(self, action: str, key: str | None, category: Category | None, nbytes: int,
             actor: str | None = None, **extra: Any) -> dict[str, Any]:
        """Record one audit line (and its JSON, made with it: see ``line_text``),
        and its history-index columns when they are the change's own (as
        :meth:`brief_lines` does: see :func:`log_change`)."""
        now, agent, seq, epoch = self.now_us, self.agent_id, self.seq, self.epoch
        ts = format_time(now)
        who = actor if actor is not None else self.actor
        cat = None if category is None else _VALUES[category]  # not the enum's property
        eid = None if key is None or agent is None else entry_id(agent, key)
        if extra and not HEAD_FIELDS.isdisjoint(extra):
            raise ValueError(f"an audit line's extra fields repeat {sorted(HEAD_FIELDS & set(extra))}")
        context = AUDIT_CONTEXT.get()
        if context is not None and "context" not in extra:
            extra["context"] = context  # the run it was made for (memory/context.py)
        entry = audit_line(ts, agent, action, key, cat, who, nbytes, eid, extra, seq, epoch)
        self.lines.append(entry)
        self.texts.append(line_text(ts, agent, action, key, cat, who, nbytes, eid, extra,
                                    seq, epoch))
        if seq.__class__ is int and epoch.__class__ is str and nbytes.__class__ is int \
                and agent.__class__ is str and 0 <= now < _YEAR_10000_US \
                and (key is None or key.__class__ is str) \
                and "seq" not in extra and "epoch" not in extra:
            # The line's index row from the change's own fields, where rows_for
            # would read each back from the dict (entry_of), the time parsed
            # from ``ts`` again: what that gives back is ``now`` in this range.
            self.index_runs.append((len(self.lines) - 1, (seq, epoch, now, action),
                                    (str_key_hash(key),), (cat,), (nbytes,)))
        return entry

    def brief_lines(self, action: str, briefs: Sequence[Brief], actor: str | None = None,
                    **shared: Any) -> None:
        """One line per removed entry, exactly as ``line(action, b.key, b.category,
        b.size, actor, createdBy=b.created_by, **shared)`` would record each.

        What it saves: the fields all of them share (time, agent, action,
        actor, ``shared``, epoch, seq) are formatted once instead of per line
        (:class:`~rotifer.memory.audit.text.BriefTemplate`), and the rest is
        done a field at a time over all the entries (``zip(*briefs)``, the
        ids by :func:`~rotifer.memory.model.entry_ids`, each kind of part in
        one comprehension): a third of a line's cost or less (the figures are
        in docs/benchmarks.md, "Figures behind the code's choices")."""
        if not briefs:
            return
        ts = format_time(self.now_us)
        who = actor if actor is not None else self.actor
        agent = self.agent_id
        keys, categories, sizes, _, _, creators = zip(*briefs, strict=True)
        if agent is None or "createdBy" in shared or not HEAD_FIELDS.isdisjoint(shared) \
                or set(map(type, sizes)) != {int} or set(map(type, creators)) != {str}:
            # What the template does not cover: no agent, odd fields, or a size or
            # creator of another type (a damaged store) -- the encoder's way.
            for b in briefs:
                self.line(action, b.key, b.category, b.size, actor, createdBy=b.created_by,
                          **shared)
            return
        seq, epoch = self.seq, self.epoch
        values = list(map(_VALUES.__getitem__, categories))
        ids = entry_ids(agent, keys)
        sample = audit_line(ts, agent, action, "", "", who, 0, "", {"createdBy": "", **shared},
                            seq, epoch)
        if type(seq) is int and type(epoch) is str and 0 <= self.now_us < _YEAR_10000_US:
            # The history index's columns of these lines now, from the entries'
            # own fields, where rows_for would read each back from its line (the
            # time is the change's: what parsing ``ts`` gives back in that range).
            self.index_runs.append((len(self.lines), (seq, epoch, self.now_us, action),
                                    key_hashes(keys), values, sizes))
        # Each line the sample (its fields in order, which an update keeps) with
        # the entry's five: one call per line, the copy and the five set in C.
        self.lines += [dict(sample, key=key, category=value, bytes=size, entryId=eid,
                            createdBy=creator)
                       for key, value, size, eid, creator
                       in zip(keys, values, sizes, ids, creators, strict=True)]
        self.texts += BriefTemplate(ts, agent, action, who, shared, seq, epoch).texts(
            keys, values, sizes, ids, creators)

    def refuse(self, error: AgentMemoryError, operation: str, key: str | None,
               category: Category | None, nbytes: int = 0) -> None:
        action = QUOTA_EXCEEDED if error.code is ErrorCode.QUOTA_EXCEEDED else ACCESS_DENIED
        self.line(action, key, category, nbytes, operation=operation, code=error.code.value,
                  reason=error.message)
        self.error = error


def log_change(tx: Transaction, audit: AuditLog, agent_id: str, seq: int,
               lines: list[dict[str, Any]], change: Change | None = None) -> str:
    """Record a change's lines before its commit: in the backend's own copy (in
    the same transaction; ``log_lines`` does nothing where the backend keeps
    none), then appended to the log.  From here on a failure must be settled,
    so ``change.logged`` is set first.  Returns the hash of the last line
    appended, the anchor the caller commits as the agent's ``head``."""
    continues = change is not None and change.appended  # its next batch (a long change)
    if change is not None:
        change.logged = True
    encoded = change.texts if change is not None and change.lines is lines \
        else encode_lines(lines)
    tx.log_lines(agent_id, seq, encoded)
    # The index rows are committed with the anchor, or not at all.  A change that
    # made its lines' columns with them (an eviction's, a write's) has its lines placed by
    # column and its rows zipped from both, when they went out as they are (no
    # phantom's rolled_back line before them).
    if change is not None and change.index_runs and change.lines is lines \
            and change.agent_id == agent_id:
        places = Places()
        head = audit.write(lines, encoded, places, continues)
        if len(places.lines) == len(lines):
            tx.index_lines(rows_with(agent_id, places, change.index_runs))
        else:
            tx.index_lines(rows_for(agent_id, places.placed()))
    else:
        placed: Placed = []
        head = audit.write(lines, encoded, placed, continues)
        tx.index_lines(rows_for(agent_id, placed))
    if change is not None:
        change.appended = True
    return head


def index_outside(backend: Backend, agent_id: str | None, placed: Placed) -> None:
    """Index lines appended outside any change (a refusal, an export, a
    ``rolled_back`` line) in a transaction of their own; best effort: a line
    missed here is put back by ``audit verify`` (see :mod:`.audit.index`)."""
    if agent_id is None or not placed:
        return
    with contextlib.suppress(Exception), backend.write(agent_id) as tx:
        tx.index_lines(rows_for(agent_id, placed))


def committed(backend: Backend, agent_id: str, seq: int, removes_agent: bool = False) -> bool:
    """Was change ``seq`` of ``agent_id`` committed?  Asked of the store itself,
    under the agent's write lock: a COMMIT whose outcome the caller never heard
    (its connection cut, the server waiting for a synchronous standby) may still
    be under way there and holds that lock until it ends, so the answer is
    final, never "not yet"."""
    with backend.write(agent_id) as tx:
        return _counted(tx, agent_id, seq, removes_agent)


def _counted(tx: Transaction, agent_id: str, seq: int, removes_agent: bool) -> bool:
    record = tx.get_agent(agent_id)
    if removes_agent:
        return record is None or record.next_seq != seq
    return record is not None and record.next_seq > seq


def settle(backend: Backend, audit: AuditLog, clock: Clock, change: Change,
           exc: BaseException) -> None:
    """After a change whose lines were appended failed: if the store says it was
    not committed, append its ``rolled_back`` line.  Best effort: if the store
    cannot be asked or the line cannot be written, the next change of the agent
    or ``rotifer agent audit verify`` writes it.  The agent is held from the
    question to the line: a change of it made in between would take the same
    number, and the line would then follow that change's lines."""
    if not change.logged or change.agent_id is None or change.seq is None:
        return
    try:
        with backend.write(change.agent_id) as tx:
            if _counted(tx, change.agent_id, change.seq, change.removes_agent):
                return
            if not change.appended and change.lines and not audit.ends_with(
                    change.agent_id, change.seq, change.lines[-1]["ts"]):
                return  # interrupted before its lines went out: nothing to take back
            if isinstance(exc, AgentMemoryError):
                # Its public name, which rolled_back lines have always carried.
                reason = f"not committed: MemoryError {exc.code.value}"
            else:
                reason = f"not committed: {type(exc).__name__}"
            placed: Placed = []
            audit.write([rolled_back_line(format_time(clock.now_us()), change.agent_id,
                                          change.seq, reason, change.actor, change.epoch)],
                        placed=placed)
            tx.index_lines(rows_for(change.agent_id, placed))
    except Exception:
        pass
