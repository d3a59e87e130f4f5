"""The memory store: the seed's rules, written once above the backend interface.

:class:`MemoryStore` owns a backend, the audit log and a clock.  Genes never
see it directly: each gets a :class:`~rotifer.memory.gene_memory.GeneMemory`,
a view that acts under the gene's v2 id and domain and checks the entry's
access policy before every read, write and delete.  The deployer gets a
:class:`~rotifer.memory.deployer_memory.DeployerMemory`, which lists without
values and deletes whatever the policies say.

Every change happens inside one backend write transaction, and its audit
lines are appended *before* that transaction commits; if they cannot be
appended the transaction rolls back and the caller gets
MEMORY_STORAGE_ERROR.  A write over quota therefore either evicts and writes
together, or does neither.  How a change is timed and numbered, and what
happens when it does not commit, is :mod:`rotifer.memory.changes`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .audit import DEPLOYER, AuditLog
from .audit.actions import ACCESS_DENIED, DROP_AGENT, EXPIRE
from .audit.file import Placed
from .clock import Clock, SystemClock
from .engine.changes import Change, index_outside, log_change, new_epoch, settle, to_entry
from .errors import AgentMemoryError, ErrorCode, denied, invalid, storage
from .model import DataPolicy, check_agent_id
from .private import private_dir, secure
from .storage.backend import AgentRecord, Backend, Transaction
from .views.deployer_memory import DeniedMemory, DeployerMemory
from .views.gene_memory import GeneMemory, GeneMemoryAccess

DEFAULT_QUOTA_BYTES = 10 * 1024 * 1024
_T = TypeVar("_T")

__all__ = ["DEFAULT_QUOTA_BYTES", "DeniedMemory", "DeployerMemory", "GeneMemory",
           "GeneMemoryAccess", "MemoryStore", "to_entry"]


class MemoryStore:
    """All agents' memory in one backend, with one audit log and one clock."""

    def __init__(self, backend: Backend, audit: AuditLog, clock: Clock | None = None) -> None:
        self.backend = backend
        self.audit = audit
        self.clock: Clock = clock or SystemClock()
        #: Whether gene calls try the lean paths (:mod:`rotifer.memory.lean`)
        #: first: the backend's choice (:attr:`Backend.lean_paths`).
        #: ``tests/memory/test_lean.py`` and ``bench/lean.py`` set it either way
        #: to run both paths on the same operations and compare them.
        self.lean_paths = backend.lean_paths

    @classmethod
    def open(cls, rotifer_dir: Path, url: str | None = None, clock: Clock | None = None,
             *, create: bool = True) -> MemoryStore:
        """Open the project's memory: ``url`` or ``ROTIFER_MEMORY_URL`` if it names a
        PostgreSQL server, else ``rotifer_dir/playground.db``.  Never falls back.

        ``create=False`` opens only a store that exists: an SQLite file that is
        missing or holds no memory tables is MEMORY_STORAGE_ERROR naming it, and
        nothing is created or repaired (for commands that only use memory).
        """
        rotifer_dir = Path(rotifer_dir)
        if create:
            try:
                private_dir(rotifer_dir)
            except OSError as exc:
                raise storage(f"cannot create {rotifer_dir}: {exc.strerror or exc}") from exc
        secure(rotifer_dir)
        url = url or os.environ.get("ROTIFER_MEMORY_URL") or None
        backend: Backend
        if url is None or url.startswith("sqlite:"):
            from .storage.sqlite import SqliteBackend

            path = Path(url[len("sqlite:"):]) if url else rotifer_dir / "playground.db"
            backend = SqliteBackend(path, create=create)
        elif url.startswith(("postgresql://", "postgres://")):
            from .storage.postgres import PostgresBackend  # type: ignore[import-not-found,unused-ignore]

            backend = PostgresBackend(url)
        else:
            raise storage(f"unknown memory URL {url!r}: use postgresql://... or sqlite:PATH")
        audit = AuditLog(rotifer_dir / "audit.jsonl", rotifer_dir / "telemetry.jsonl")
        return cls(backend, audit, clock)

    def close(self) -> None:
        try:
            self.backend.close()
        finally:
            self.audit.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- agents ---------------------------------------------------------------

    def create_agent(self, agent_id: str, quota_bytes: int = DEFAULT_QUOTA_BYTES,
                     data_policy: DataPolicy | None = None) -> None:
        """Give an agent an empty memory with its quota and data policy."""
        check_agent_id(agent_id)
        if not isinstance(quota_bytes, int) or isinstance(quota_bytes, bool) or quota_bytes <= 0:
            raise invalid("memory quota must be a positive number of bytes")
        policy = data_policy or DataPolicy()
        with self.backend.write(agent_id) as tx:
            if tx.get_agent(agent_id) is not None:
                raise invalid(f"agent {agent_id!r} already has a memory")
            epoch = new_epoch()
            tx.insert_agent(AgentRecord(agent_id, quota_bytes, policy, 0, 1, 0, epoch))
            # A new memory: its history starts in the index (rows of an earlier
            # memory of the same name are not its history: they go).
            tx.set_indexed(agent_id, epoch, True, [])

    def has_agent(self, agent_id: str) -> bool:
        with self.backend.peek() as tx:
            return tx.get_agent(agent_id) is not None

    def agents(self) -> list[str]:
        with self.backend.peek() as tx:
            return tx.list_agents()

    def agent_record(self, agent_id: str) -> AgentRecord:
        with self.backend.peek() as tx:
            record = tx.get_agent(agent_id)
        if record is None:
            raise storage(f"agent {agent_id!r} has no memory in this store")
        return record

    def usage(self, agent_id: str) -> tuple[int, int]:
        """(bytes used, quota) -- after removing what has expired."""
        self.purge_expired(agent_id)
        record = self.agent_record(agent_id)
        return record.used_bytes, record.quota_bytes

    def drop_agent(self, agent_id: str) -> None:
        """Remove an agent's whole memory (used for ``rotifer test``'s memory)."""
        change = Change(agent_id, 0, DEPLOYER, removes_agent=True)
        try:
            with self.backend.write(agent_id) as tx:
                record = tx.get_agent(agent_id)
                if record is None:
                    return
                self._begin(change, record)
                change.line(DROP_AGENT, None, None, record.used_bytes,
                            entries=tx.count(agent_id))
                log_change(tx, self.audit, agent_id, record.next_seq,
                           change.lines, change)
                tx.delete_agent(agent_id)
        except BaseException as exc:
            settle(self.backend, self.audit, self.clock, change, exc)
            raise

    def for_gene(self, agent_id: str, gene_id: str | None, domain: str | None, *,
                 via: str | None = None) -> GeneMemory:
        """The view a gene gets as ``ctx.memory``; ``gene_id=None`` is refused everything.
        ``via`` (e.g. ``"mcp"``) is written into the audit lines of its writes and deletes.

        Never on a read-only standby: a gene must read what it wrote, and a
        standby may be behind (MEMORY_STORAGE_ERROR naming it)."""
        if self.backend.read_only:
            raise storage(f"the memory database at {self.backend.location} is a read-only "
                          "standby: genes run on the primary only (a URL with "
                          "target_session_attrs=read-write), so that they read what they wrote")
        record = self.agent_record(agent_id)
        return GeneMemory(self, agent_id, gene_id, domain, record.data_policy, via)

    def replay_delay(self) -> float | None:
        """Reading a hot standby: how far behind it is, in seconds (see
        :meth:`rotifer.memory.postgres.PostgresBackend.replay_delay`); None on a
        primary or SQLite."""
        if not self.backend.read_only:
            return None
        # Only a PostgreSQL backend can be read-only; the interface stays small.
        delay: float | None = getattr(self.backend, "replay_delay")()  # noqa: B009
        return delay

    def deployer(self, agent_id: str) -> DeployerMemory:
        self.agent_record(agent_id)
        return DeployerMemory(self, agent_id)

    # -- the machinery every call shares ------------------------------------

    def _begin(self, change: Change, record: AgentRecord, now: int | None = None) -> None:
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
        change = Change(agent_id, 0, actor)
        try:
            with self.backend.write(agent_id) as tx:
                # The clock is read only holding the agent (see changes.py).
                # What has expired is judged by the clock, as reads and queries do;
                # the change's own time may be a little later (never earlier).
                opened, clock_now = tx.lookup_holding(agent_id, key, self.clock)
                if opened is None:
                    raise storage(f"agent {agent_id!r} has no memory in this store")
                record, stale, row = opened
                self._begin(change, record, clock_now)
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
        except BaseException as exc:
            if change.logged:
                settle(self.backend, self.audit, self.clock, change, exc)
            raise
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
        return opened is not None and opened[1]

    def surely_absent(self, agent_id: str, key: str) -> bool:
        """True when one lock-free statement shows the agent, nothing expired and
        no entry ``key``: a delete of it then changes nothing, so it answers
        MEMORY_NOT_FOUND without a write transaction (no lock, no writes).  Any
        other answer (no agent, something to purge, an entry) goes the full way."""
        with self.backend.peek() as tx:
            opened = tx.lookup(agent_id, key, self.clock.now_us())
        return opened is not None and not opened[1] and opened[2] is None

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
        change = Change(agent_id, self.clock.now_us(), actor)
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
