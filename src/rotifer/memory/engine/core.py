"""The engine every call of the views runs through.

:class:`Engine` holds a backend, the audit log and a clock, and makes a
change the one way changes are made: one backend write transaction on the
agent (:meth:`Engine.change`), expired entries purged first, the change timed
and numbered, its audit lines appended before the commit, a refusal audited
and then raised; what happens when a change does not commit is
:mod:`.changes`.  It also answers the cheap questions a call asks before it
takes that way (:meth:`~Engine.has_expired`, :meth:`~Engine.surely_absent`)
and audits a call refused before any transaction
(:meth:`~Engine.refuse_outside`).

The views (:mod:`rotifer.memory.views`) hold an engine; the store
(:class:`~rotifer.memory.store.MemoryStore`) is an engine that also opens,
creates and drops agents and hands the views out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..audit import AuditLog
from ..audit.actions import ACCESS_DENIED, EXPIRE
from ..audit.places import Placed
from ..clock import Clock, SystemClock
from ..errors import AgentMemoryError, ErrorCode, denied, storage
from ..storage.backend import AgentRecord, Backend, Row, Transaction
from .changes import Change, index_outside, log_change, settle

_T = TypeVar("_T")


class Engine:
    """One backend, one audit log, one clock, and the way every change is made."""

    def __init__(self, backend: Backend, audit: AuditLog, clock: Clock | None = None) -> None:
        self.backend = backend
        self.audit = audit
        self.clock: Clock = clock or SystemClock()
        #: Whether gene calls try the lean paths (:mod:`rotifer.memory.views.gene_view`)
        #: first: the backend's choice (:attr:`Backend.lean_paths`).
        #: ``tests/memory/test_lean.py`` and ``bench/lean.py`` set it either way
        #: to run both paths on the same operations and compare them.
        self.lean_paths = backend.lean_paths

    # -- the machinery every call shares ------------------------------------

    def begin(self, change: Change, record: AgentRecord, now: int | None = None) -> None:
        """Time and number ``change``; called once it holds the agent."""
        now = self.clock.now_us() if now is None else now
        change.now_us = now if now > record.last_us else record.last_us + 1
        change.seq = record.next_seq
        change.epoch = record.epoch
        change.used = record.used_bytes

    def change(self, agent_id: str, actor: str | None,
               body: Callable[[Transaction, AgentRecord, Change], _T],
               key: str | None = None) -> _T:
        """Run ``body`` in one write transaction on ``agent_id``.

        Expired entries go first.  ``body`` records audit lines on the change,
        sets ``change.used`` when the byte total changes, and may set
        ``change.error`` to refuse; a change with lines then commits its number
        and time with one ``update_agent`` and appends its lines, before the
        commit; the refusal is raised after it (so a refusal is audited and the
        expiry purge it triggered still happens).  With ``key``, ``change.row``
        is that entry as stored (``None`` if there is none).  If the change
        does not commit after its lines were appended, :func:`settle` says so
        in the log before the exception goes on.
        """
        change = Change(agent_id, actor=actor)
        try:
            with self.backend.write(agent_id) as tx:
                # The clock is read only holding the agent (see changes.py).
                # What has expired is judged by the clock, as reads and queries do;
                # the change's own time may be a little later (never earlier).
                opened, clock_now = tx.lookup_holding(agent_id, key, self.clock)
                result = self.change_holding(tx, change, opened, clock_now, body)
        except BaseException as exc:
            if change.logged:
                settle(self.backend, self.audit, self.clock, change, exc)
            raise
        # speed: a change without a refusal returns here, one call fewer (~1k instructions)
        return result if change.error is None else self.changed(change, result)

    def change_holding(self, tx: Transaction, change: Change,
                       opened: tuple[AgentRecord, bool, Row | None] | None, clock_now: int,
                       body: Callable[[Transaction, AgentRecord, Change], _T]) -> _T:
        """:meth:`change` inside its transaction, from the agent's lookup on.

        Also for a lean path that found, holding the agent, that its call needs
        the full one (a write that evicts or is refused over quota): it goes on
        here in the same transaction instead of rolling back and looking the
        agent up again.  The caller settles ``change`` if this raises after it
        was logged, and hands the result to :meth:`changed` after the commit."""
        agent_id = change.agent_id
        assert agent_id is not None
        if opened is None:
            raise storage(f"agent {agent_id!r} has no memory in this store")
        record, stale, row = opened
        self.begin(change, record, clock_now)
        if stale:
            record = self._purge(tx, record, change, clock_now)
            if row is not None and row.expires_us is not None \
                    and row.expires_us <= clock_now:
                row = None  # just purged
        change.row = row
        result = body(tx, record, change)
        if change.lines:
            # The append first: its last line's hash is the anchor the
            # counters' one statement commits (still before the commit).
            head = log_change(tx, self.audit, agent_id, record.next_seq,
                              change.lines, change)
            tx.update_agent(agent_id, change.used, record.next_seq + 1, change.now_us,
                            head)
        return result

    def changed(self, change: Change, result: _T) -> _T:
        """A committed change's outcome: its refusal raised (reported to telemetry
        when access was denied), else ``result``."""
        if change.error is not None:
            if change.error.code is ErrorCode.ACCESS_DENIED:
                self._telemetry_denied(change)
            raise change.error
        return result

    def _purge(self, tx: Transaction, record: AgentRecord, change: Change, clock_now: int
               ) -> AgentRecord:
        expired = list(tx.iter_expired(record.agent_id, clock_now))
        if not expired:
            return record
        change.brief_lines(EXPIRE, expired, actor="retention")
        tx.delete(record.agent_id, [b.key for b in expired])
        change.used = record.used_bytes - sum(b.size for b in expired)
        return record._replace(used_bytes=change.used)

    def has_expired(self, agent_id: str, now_us: int) -> bool:
        with self.backend.peek() as tx:
            opened = tx.lookup(agent_id, None, now_us)
        if opened is None:
            return False
        _, stale, _ = opened
        return stale

    def surely_absent(self, agent_id: str, key: str) -> bool:
        """True when one lock-free statement shows the agent, nothing expired and
        no entry ``key``: a delete of it then changes nothing, so it answers
        MEMORY_NOT_FOUND without a write transaction (no lock, no writes).  Any
        other answer (no agent, something to purge, an entry) goes the full way."""
        with self.backend.peek() as tx:
            opened = tx.lookup(agent_id, key, self.clock.now_us())
        if opened is None:
            return False
        _, stale, row = opened
        return not stale and row is None

    def purge_expired(self, agent_id: str) -> None:
        """Remove (and audit) whatever has expired, if anything has.  Not on a
        read-only standby: expired entries are invisible there all the same, and
        the primary purges them on its next call."""
        if self.backend.read_only:
            return
        if self.has_expired(agent_id, self.clock.now_us()):
            self.change(agent_id, "retention", lambda tx, record, change: None)

    def refuse_outside(self, agent_id: str | None, operation: str, reason: str,
                       key: str | None = None, actor: str | None = None,
                       via: str | None = None) -> AgentMemoryError:
        """Audit (and report to telemetry) a call refused before any transaction;
        ``via`` as for :meth:`for_gene`."""
        error = denied(reason)
        change = Change(agent_id, now_us=self.clock.now_us(), actor=actor)
        change.refuse(error, operation, key if isinstance(key, str) else None, None)
        if via is not None:
            change.lines[-1]["via"] = via
        placed: Placed = []
        self.audit.write(change.lines, placed=placed)
        index_outside(self.backend, agent_id, placed)
        self._telemetry_denied(change)
        return error

    def _telemetry_denied(self, change: Change) -> None:
        for line in change.lines:
            if line["action"] == ACCESS_DENIED:
                self.audit.telemetry({
                    "ts": line["ts"], "event": "memory_access_denied", "agent": line["agent"],
                    "operation": line.get("operation"), "actor": line["actor"],
                    "category": line["category"],
                })
