"""The memory store: the seed's rules, written once above the backend interface.

:class:`MemoryStore` owns a backend, the audit log and a clock.  Genes never
see it directly: each gets a :class:`GeneMemory`, a view that acts under the
gene's v2 id and domain and checks the entry's access policy before every
read, write and delete.  The deployer gets a :class:`DeployerMemory`, which
lists without values and deletes whatever the policies say.

Every change happens inside one backend write transaction, and its audit
lines are appended *before* that transaction commits; if they cannot be
appended the transaction rolls back and the caller gets
MEMORY_STORAGE_ERROR.  A write over quota therefore either evicts and writes
together, or does neither.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .audit import DEPLOYER, AuditLog
from .backend import AgentRecord, Backend, Brief, Row, Transaction
from .clock import Clock, SystemClock, format_time
from .errors import ErrorCode, MemoryError, denied, invalid, storage
from .model import (
    DEFAULT_ACCESS_POLICY,
    EVICTION_ORDER,
    MAX_QUERY_BYTES,
    UNSET,
    AccessPolicy,
    Category,
    DataPolicy,
    MemoryEntry,
    MemoryFilter,
    RetentionPolicy,
    Unset,
    check_key,
    check_value,
    entry_id,
    parse_category,
    parse_retention,
    stored_entry,
)
from .policy import Actor, check_fits_data_policy, expires_at, scope_allows

DEFAULT_QUOTA_BYTES = 10 * 1024 * 1024
_T = TypeVar("_T")


class GeneMemoryAccess(Protocol):
    """The four calls a gene gets as ``ctx.memory``."""

    def read_memory(self, key: str, category: Category | str | None = None) -> MemoryEntry | None:
        ...

    def write_memory(
        self,
        key: str,
        value: bytes,
        category: Category | str,
        access_policy: AccessPolicy | dict[str, Any] | None = None,
        retention_policy: RetentionPolicy | dict[str, Any] | Unset | None = UNSET,
    ) -> MemoryEntry: ...

    def query_memory(self, filter: MemoryFilter | dict[str, Any] | None = None) -> list[MemoryEntry]:
        ...

    def delete_memory(self, key: str) -> None: ...


def to_entry(row: Row, last_accessed_by: str | None = None) -> MemoryEntry:
    return stored_entry(
        entry_id(row.agent_id, row.key), row.category, row.key, row.value, row.created_by,
        last_accessed_by or row.last_accessed_by, format_time(row.created_us),
        format_time(row.updated_us), row.access, row.retention,
    )


@dataclass
class _Change:
    """What one write transaction will do: audit lines first, then the change."""

    agent_id: str | None
    now_us: int
    actor: str | None
    lines: list[dict[str, Any]] = field(default_factory=list)
    error: MemoryError | None = None
    #: The entry under the call's key as stored when the transaction began
    #: (after the expiry purge), so the body need not read it again.
    row: Row | None = None

    def line(self, action: str, key: str | None, category: Category | None, nbytes: int,
             actor: str | None = None, **extra: Any) -> dict[str, Any]:
        entry = {
            "ts": format_time(self.now_us),
            "agent": self.agent_id,
            "action": action,
            "key": key,
            "category": None if category is None else category.value,
            "actor": actor if actor is not None else self.actor,
            "bytes": nbytes,
            "entryId": None if key is None or self.agent_id is None
            else entry_id(self.agent_id, key),
        }
        entry.update(extra)
        self.lines.append(entry)
        return entry

    def refuse(self, error: MemoryError, operation: str, key: str | None,
               category: Category | None, nbytes: int = 0) -> None:
        action = "quota_exceeded" if error.code is ErrorCode.QUOTA_EXCEEDED else "access_denied"
        self.line(action, key, category, nbytes, operation=operation, code=error.code.value,
                  reason=error.message)
        self.error = error


class MemoryStore:
    """All agents' memory in one backend, with one audit log and one clock."""

    def __init__(self, backend: Backend, audit: AuditLog, clock: Clock | None = None) -> None:
        self.backend = backend
        self.audit = audit
        self.clock: Clock = clock or SystemClock()

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
                rotifer_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise storage(f"cannot create {rotifer_dir}: {exc.strerror or exc}") from exc
        url = url or os.environ.get("ROTIFER_MEMORY_URL") or None
        backend: Backend
        if url is None or url.startswith("sqlite:"):
            from .sqlite import SqliteBackend

            path = Path(url[len("sqlite:"):]) if url else rotifer_dir / "playground.db"
            backend = SqliteBackend(path, create=create)
        elif url.startswith(("postgresql://", "postgres://")):
            from .postgres import PostgresBackend  # type: ignore[import-not-found,unused-ignore]

            backend = PostgresBackend(url)
        else:
            raise storage(f"unknown memory URL {url!r}: use postgresql://... or sqlite:PATH")
        audit = AuditLog(rotifer_dir / "audit.jsonl", rotifer_dir / "telemetry.jsonl")
        return cls(backend, audit, clock)

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- agents ---------------------------------------------------------------

    def create_agent(self, agent_id: str, quota_bytes: int = DEFAULT_QUOTA_BYTES,
                     data_policy: DataPolicy | None = None) -> None:
        """Give an agent an empty memory with its quota and data policy."""
        if not isinstance(agent_id, str) or not agent_id or "\x00" in agent_id:
            raise invalid("agent id must be a non-empty string without NUL")
        if not isinstance(quota_bytes, int) or isinstance(quota_bytes, bool) or quota_bytes <= 0:
            raise invalid("memory quota must be a positive number of bytes")
        policy = data_policy or DataPolicy()
        with self.backend.write(agent_id) as tx:
            if tx.get_agent(agent_id) is not None:
                raise invalid(f"agent {agent_id!r} already has a memory")
            tx.insert_agent(AgentRecord(agent_id, quota_bytes, policy, 0, 1))

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
        with self.backend.write(agent_id) as tx:
            record = tx.get_agent(agent_id)
            if record is None:
                return
            change = _Change(agent_id, self.clock.now_us(), DEPLOYER)
            change.line("drop_agent", None, None, record.used_bytes, entries=tx.count(agent_id))
            self.audit.write(change.lines)
            tx.delete_agent(agent_id)

    def for_gene(self, agent_id: str, gene_id: str | None, domain: str | None) -> GeneMemory:
        """The view a gene gets as ``ctx.memory``; ``gene_id=None`` is refused everything."""
        record = self.agent_record(agent_id)
        return GeneMemory(self, agent_id, gene_id, domain, record.data_policy)

    def deployer(self, agent_id: str) -> DeployerMemory:
        self.agent_record(agent_id)
        return DeployerMemory(self, agent_id)

    # -- the machinery every call shares ------------------------------------

    def change(self, agent_id: str, actor: str | None,
               body: Callable[[Transaction, AgentRecord, _Change], _T],
               key: str | None = None) -> _T:
        """Run ``body`` in one write transaction on ``agent_id``.

        Expired entries go first.  ``body`` records audit lines on the change and
        may set ``change.error`` to refuse; the lines are appended before the
        commit and the refusal is raised after it (so a refusal is audited and
        the expiry purge it triggered still happens).  With ``key``,
        ``change.row`` is that entry as stored (``None`` if there is none).
        """
        now = self.clock.now_us()
        change = _Change(agent_id, now, actor)
        with self.backend.write(agent_id) as tx:
            opened = tx.lookup(agent_id, key, now)
            if opened is None:
                raise storage(f"agent {agent_id!r} has no memory in this store")
            record, stale, row = opened
            if stale:
                record = self._purge(tx, record, change)
                if row is not None and row.expires_us is not None and row.expires_us <= now:
                    row = None  # just purged
            change.row = row
            result = body(tx, record, change)
            self.audit.write(change.lines)
        if change.error is not None:
            if change.error.code is ErrorCode.ACCESS_DENIED:
                self._telemetry_denied(change)
            raise change.error
        return result

    def _purge(self, tx: Transaction, record: AgentRecord, change: _Change) -> AgentRecord:
        expired = list(tx.iter_expired(record.agent_id, change.now_us))
        if not expired:
            return record
        for brief in expired:
            change.line("expire", brief.key, brief.category, brief.size, actor="retention",
                        createdBy=brief.created_by)
        tx.delete(record.agent_id, [b.key for b in expired])
        used = record.used_bytes - sum(b.size for b in expired)
        tx.update_agent(record.agent_id, used, record.next_seq)
        return AgentRecord(record.agent_id, record.quota_bytes, record.data_policy, used,
                           record.next_seq)

    def has_expired(self, agent_id: str, now_us: int) -> bool:
        with self.backend.peek() as tx:
            opened = tx.lookup(agent_id, None, now_us)
        return opened is not None and opened[1]

    def purge_expired(self, agent_id: str) -> None:
        """Remove (and audit) whatever has expired, if anything has."""
        if self.has_expired(agent_id, self.clock.now_us()):
            self.change(agent_id, "retention", lambda tx, record, change: None)

    def refuse_outside(self, agent_id: str | None, operation: str, reason: str,
                       key: str | None = None, actor: str | None = None) -> MemoryError:
        """Audit (and report to telemetry) a call refused before any transaction."""
        error = denied(reason)
        change = _Change(agent_id, self.clock.now_us(), actor)
        change.refuse(error, operation, key if isinstance(key, str) else None, None)
        self.audit.write(change.lines)
        self._telemetry_denied(change)
        return error

    def _telemetry_denied(self, change: _Change) -> None:
        for line in change.lines:
            if line["action"] == "access_denied":
                self.audit.telemetry({
                    "ts": line["ts"], "event": "memory_access_denied", "agent": line["agent"],
                    "operation": line.get("operation"), "actor": line["actor"],
                    "category": line["category"],
                })


#: What a gene id must look like (the gene layer's ``V2_ID_RE``; memory/ does not
#: import genes/).  Checked once per view, so a call costs nothing more.
_V2_ID = re.compile(r"v2:[0-9a-f]{64}")


class GeneMemory:
    """One gene's view of its agent's memory: the seed's four calls.

    A ``gene_id`` that is not ``v2:`` + 64 lowercase hex digits is no v2 id:
    the view refuses every call exactly as for ``gene_id=None`` (audited with
    no actor), so a malformed string never becomes an entry's ``createdBy``."""

    def __init__(self, store: MemoryStore, agent_id: str, gene_id: str | None,
                 domain: str | None, data_policy: DataPolicy) -> None:
        self.store = store
        self.agent_id = agent_id
        self.actor: Actor | None = None
        self._no_id = "this gene has no v2 id (wrap or compile it again), so it cannot use memory"
        if isinstance(gene_id, str) and _V2_ID.fullmatch(gene_id):
            self.actor = Actor(gene_id, domain)
        elif gene_id is not None:
            self._no_id = ("this gene's id is not a v2 id ('v2:' and 64 lowercase hex digits), "
                           "so it cannot use memory")
        self.data_policy = data_policy

    def _require_actor(self, operation: str, key: object = None) -> Actor:
        if self.actor is None:
            raise self.store.refuse_outside(self.agent_id, operation, self._no_id,
                                            key if isinstance(key, str) else None)
        return self.actor

    # -- read -------------------------------------------------------------------

    def read_memory(self, key: str, category: Category | str | None = None) -> MemoryEntry | None:
        actor = self._require_actor("read", key)
        check_key(key)
        wanted = None if category is None else parse_category(category)
        store = self.store
        now = store.clock.now_us()
        with store.backend.peek() as tx:
            opened = tx.lookup(self.agent_id, key, now)  # one statement
        stale, row = (False, None) if opened is None else opened[1:]
        if not stale:
            if row is None or (wanted is not None and row.category is not wanted):
                return None
            if not scope_allows(row.access.read_scope, actor, row.created_by, row.creator_domain):
                store.change(self.agent_id, actor.gene_id,
                             lambda tx, rec, ch: self._read_in(tx, ch, key, wanted, actor), key)
                return None  # pragma: no cover - _read_in refuses
            if row.last_accessed_by == actor.gene_id:
                return to_entry(row)  # nothing changes, so nothing is written
        return store.change(self.agent_id, actor.gene_id,
                            lambda tx, rec, ch: self._read_in(tx, ch, key, wanted, actor), key)

    def _read_in(self, tx: Transaction, change: _Change, key: str, wanted: Category | None,
                 actor: Actor) -> MemoryEntry | None:
        row = change.row
        if row is None or (wanted is not None and row.category is not wanted):
            return None
        if not scope_allows(row.access.read_scope, actor, row.created_by, row.creator_domain):
            change.refuse(denied(
                f"gene may not read {key!r}: its readScope is {row.access.read_scope.value}"),
                "read", key, row.category)
            return None
        if row.last_accessed_by != actor.gene_id:
            tx.touch(self.agent_id, key, actor.gene_id)
        return to_entry(row, actor.gene_id)

    # -- write ------------------------------------------------------------------

    def write_memory(
        self,
        key: str,
        value: bytes,
        category: Category | str,
        access_policy: AccessPolicy | dict[str, Any] | None = None,
        retention_policy: RetentionPolicy | dict[str, Any] | Unset | None = UNSET,
    ) -> MemoryEntry:
        actor = self._require_actor("write", key)
        check_key(key)
        data = check_value(value)
        cat = parse_category(category)
        access = None if access_policy is None else AccessPolicy.parse(access_policy)
        retention: RetentionPolicy | Unset | None = (
            UNSET if retention_policy is UNSET else parse_retention(retention_policy))
        entry = self.store.change(
            self.agent_id, actor.gene_id,
            lambda tx, rec, ch: self._write_in(tx, rec, ch, actor, key, data, cat, access,
                                               retention), key)
        assert entry is not None  # a refused write raised in change()
        return entry

    def _write_in(self, tx: Transaction, record: AgentRecord, change: _Change, actor: Actor,
                  key: str, data: bytes, cat: Category, access: AccessPolicy | None,
                  retention: RetentionPolicy | Unset | None) -> MemoryEntry | None:
        """The write itself; ``None`` when refused (``change.error`` says why)."""
        size = len(key.encode()) + len(data)
        old = change.row
        if old is not None:
            if not scope_allows(old.access.write_scope, actor, old.created_by, old.creator_domain):
                change.refuse(denied(
                    f"gene may not change {key!r}: its writeScope is "
                    f"{old.access.write_scope.value}"), "write", key, cat, size)
                return None
            new_access = old.access if access is None else access
            new_retention = old.retention if retention is UNSET else retention
            if (new_access, new_retention) != (old.access, old.retention):
                if actor.gene_id != old.created_by:
                    change.refuse(denied(
                        f"only the gene that created {key!r} can change its access or "
                        "retention policy"), "write", key, cat, size)
                    return None
                problem = check_fits_data_policy(new_access, new_retention, record.data_policy)
                if problem is not None:
                    change.refuse(problem, "write", key, cat, size)
                    return None
        else:
            new_access = DEFAULT_ACCESS_POLICY if access is None else access
            new_retention = None if retention is UNSET else retention
            problem = check_fits_data_policy(new_access, new_retention, record.data_policy)
            if problem is not None:
                change.refuse(problem, "write", key, cat, size)
                return None

        old_size = 0 if old is None else old.size
        used = record.used_bytes - old_size + size
        victims: list[Brief] = []
        if used > record.quota_bytes:
            victims = _cleanup(tx, self.agent_id, key, used - record.quota_bytes)
            freed = sum(v.size for v in victims)
            if used - freed > record.quota_bytes:
                change.refuse(MemoryError(
                    ErrorCode.QUOTA_EXCEEDED,
                    f"writing {key!r} needs {size} bytes; the agent's quota of "
                    f"{record.quota_bytes} bytes is full even after cleanup "
                    "(PREFERENCE entries are never removed to make room)"),
                    "write", key, cat, size)
                return None
            for v in victims:
                change.line("evict", v.key, v.category, v.size, createdBy=v.created_by,
                            forKey=key)
            tx.delete(self.agent_id, [v.key for v in victims])
            used -= freed

        now = change.now_us
        row = Row(
            agent_id=self.agent_id, key=key, category=cat, value=data,
            created_by=actor.gene_id if old is None else old.created_by,
            creator_domain=actor.domain if old is None else old.creator_domain,
            last_accessed_by=actor.gene_id,
            created_us=now if old is None else old.created_us,
            updated_us=now, access=new_access, retention=new_retention,
            expires_us=expires_at(now, new_retention, record.data_policy),
            seq=record.next_seq,
        )
        extra: dict[str, Any] = {} if old is None else {"previousBytes": old_size}
        change.line("write" if old is None else "update", key, cat, size, **extra)
        tx.put(row)
        tx.update_agent(self.agent_id, used, record.next_seq + 1)
        return to_entry(row)

    # -- query ------------------------------------------------------------------

    def query_memory(self, filter: MemoryFilter | dict[str, Any] | None = None
                     ) -> list[MemoryEntry]:
        actor = self._require_actor("query")
        wanted = MemoryFilter.parse(filter)
        store = self.store
        store.purge_expired(self.agent_id)
        now = store.clock.now_us()
        found: list[MemoryEntry] = []
        total = 0
        with store.backend.read() as tx:
            rows: Iterator[Row] = tx.iter_newest(
                self.agent_id, category=wanted.category, key_prefix=wanted.key_prefix,
                since_us=wanted.since_us, until_us=wanted.until_us)
            for row in rows:
                if row.expires_us is not None and row.expires_us <= now:
                    continue
                if not scope_allows(row.access.read_scope, actor, row.created_by,
                                    row.creator_domain):
                    continue
                total += row.size
                if total > MAX_QUERY_BYTES:
                    raise invalid(
                        "the matching entries are larger than 4 MiB in total: lower limit or "
                        "narrow the filter")
                found.append(to_entry(row))
                if len(found) >= wanted.limit:
                    break
        return found

    # -- delete -----------------------------------------------------------------

    def delete_memory(self, key: str) -> None:
        actor = self._require_actor("delete", key)
        check_key(key)
        self.store.change(self.agent_id, actor.gene_id,
                          lambda tx, rec, ch: self._delete_in(tx, rec, ch, actor, key), key)

    def _delete_in(self, tx: Transaction, record: AgentRecord, change: _Change, actor: Actor,
                   key: str) -> None:
        row = change.row
        if row is None:
            change.error = MemoryError(ErrorCode.NOT_FOUND, f"no memory entry {key!r}")
            return
        if not scope_allows(row.access.write_scope, actor, row.created_by, row.creator_domain):
            change.refuse(denied(
                f"gene may not delete {key!r}: its writeScope is {row.access.write_scope.value}"),
                "delete", key, row.category)
            return
        change.line("delete", key, row.category, row.size)
        tx.delete(self.agent_id, [key])
        tx.update_agent(self.agent_id, record.used_bytes - row.size, record.next_seq)


def _cleanup(tx: Transaction, agent_id: str, writing: str, need: int) -> list[Brief]:
    """The entries to evict to free ``need`` bytes: CACHE, then PATTERN, then
    CONTEXT, each least recently updated first.  Never PREFERENCE, never the
    entry being written (its old bytes are already counted as freed)."""
    victims: list[Brief] = []
    for category in EVICTION_ORDER:
        for brief in tx.iter_oldest(agent_id, category):
            if brief.key == writing:
                continue
            victims.append(brief)
            need -= brief.size
            if need <= 0:
                return victims
    return victims


class DeployerMemory:
    """The agent owner's view: list without values, delete whatever the policies say."""

    def __init__(self, store: MemoryStore, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id

    def list(self, category: Category | str | None = None) -> list[MemoryEntry]:
        """Every live entry (most recently updated first); callers must not print values."""
        wanted = None if category is None else parse_category(category)
        self.store.purge_expired(self.agent_id)
        with self.store.backend.read() as tx:
            return [to_entry(r) for r in tx.iter_newest(self.agent_id, category=wanted)]

    def delete_key(self, key: str) -> int:
        check_key(key)

        def body(tx: Transaction, record: AgentRecord, change: _Change) -> int:
            row = change.row
            if row is None:
                change.error = MemoryError(ErrorCode.NOT_FOUND, f"no memory entry {key!r}")
                return 0
            return _deployer_delete(tx, record, change, [row])

        return self.store.change(self.agent_id, DEPLOYER, body, key)

    def delete_category(self, category: Category | str) -> int:
        wanted = parse_category(category)

        def body(tx: Transaction, record: AgentRecord, change: _Change) -> int:
            rows = list(tx.iter_newest(self.agent_id, category=wanted))
            return _deployer_delete(tx, record, change, rows)

        return self.store.change(self.agent_id, DEPLOYER, body)


def _deployer_delete(tx: Transaction, record: AgentRecord, change: _Change,
                     rows: list[Row]) -> int:
    for row in rows:
        change.line("deployer_delete", row.key, row.category, row.size, createdBy=row.created_by)
    if rows:
        tx.delete(record.agent_id, [r.key for r in rows])
        tx.update_agent(record.agent_id, record.used_bytes - sum(r.size for r in rows),
                        record.next_seq)
    return len(rows)


class DeniedMemory:
    """Memory for a gene that runs outside any agent (``rotifer run``): every call
    is refused with MEMORY_ACCESS_DENIED, and recorded when an audit log is given."""

    def __init__(self, reason: str = "memory calls only work when the gene runs as part of an "
                 "agent", audit: AuditLog | None = None, actor: str | None = None) -> None:
        self.reason = reason
        self.audit = audit
        self.actor = actor

    def _refuse(self, operation: str, key: object = None) -> MemoryError:
        error = denied(self.reason)
        if self.audit is not None:
            from .clock import SystemClock

            ts = format_time(SystemClock().now_us())
            line = {"ts": ts, "agent": None, "action": "access_denied",
                    "key": key if isinstance(key, str) else None, "category": None,
                    "actor": self.actor, "bytes": 0, "entryId": None, "operation": operation,
                    "code": error.code.value, "reason": self.reason}
            try:
                self.audit.write([line])
            finally:
                self.audit.telemetry({"ts": ts, "event": "memory_access_denied", "agent": None,
                                      "operation": operation, "actor": self.actor,
                                      "category": None})
        return error

    def read_memory(self, key: str, category: Category | str | None = None) -> MemoryEntry | None:
        raise self._refuse("read", key)

    def write_memory(
        self,
        key: str,
        value: bytes,
        category: Category | str,
        access_policy: AccessPolicy | dict[str, Any] | None = None,
        retention_policy: RetentionPolicy | dict[str, Any] | Unset | None = UNSET,
    ) -> MemoryEntry:
        raise self._refuse("write", key)

    def query_memory(self, filter: MemoryFilter | dict[str, Any] | None = None
                     ) -> list[MemoryEntry]:
        raise self._refuse("query")

    def delete_memory(self, key: str) -> None:
        raise self._refuse("delete", key)
