"""A gene's view of its agent's memory: the seed's four calls (``ctx.memory``).

Each call acts under the gene's v2 id and domain and checks the entry's access
policy before every read, write and delete; changes run through
:meth:`Engine.change <rotifer.memory.engine.core.Engine.change>`, which
times, numbers and audits them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar, cast

from ..audit.actions import DELETE, EVICT, UPDATE, WRITE
from ..engine.changes import Change, to_entry
from ..engine.core import Engine
from ..errors import AgentMemoryError, ErrorCode, denied, invalid
from ..filters import MemoryFilter, ParsedFilter
from ..model import (
    DEFAULT_ACCESS_POLICY,
    EVICTION_ORDER,
    MAX_QUERY_BYTES,
    UNSET,
    AccessPolicy,
    Category,
    DataPolicy,
    MemoryEntry,
    RetentionPolicy,
    Unset,
    check_key,
    check_value,
    parse_category,
    parse_retention,
)
from ..policy import Actor, check_fits_data_policy, expires_at, scope_allows
from ..storage.backend import NEWEST_PAGE, AgentRecord, Brief, Row, Transaction
from .lean import FULL, query_lean, read_lean, write_lean
from .scan import pick_newest

T = TypeVar("T")


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


#: What a gene id must look like (the gene layer's ``V2_ID_RE``; memory/ does not
#: import genes/).  Checked once per view, so a call costs nothing more.
_V2_ID = re.compile(r"v2:[0-9a-f]{64}")


class GeneMemory:
    """One gene's view of its agent's memory: the seed's four calls.

    A ``gene_id`` that is not ``v2:`` + 64 lowercase hex digits is no v2 id:
    the view refuses every call exactly as for ``gene_id=None`` (audited with
    no actor), so a malformed string never becomes an entry's ``createdBy``."""

    def __init__(self, store: Engine, agent_id: str, gene_id: str | None,
                 domain: str | None, data_policy: DataPolicy, via: str | None = None) -> None:
        self.store = store
        self.agent_id = agent_id
        #: How the calls reach the memory when not from the gene's own code (``"mcp"``:
        #: ``rotifer mcp``): the write, update and delete lines in the audit log say so.
        self.via = via
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
        if self.store.lean_paths:
            found = read_lean(self, key, category)
            if found is not FULL:
                return cast("MemoryEntry | None", found)
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
            # Only lastAccessedBy changes: no change number, no audit line, so no
            # lock and no transaction -- one statement that applies only if the
            # entry is still the one looked up (else the full way, below).
            with store.backend.peek() as tx:
                if tx.touch_if(self.agent_id, key, actor.gene_id, row.seq, now):
                    return to_entry(row, actor.gene_id)
        return store.change(self.agent_id, actor.gene_id,
                            lambda tx, rec, ch: self._read_in(tx, ch, key, wanted, actor), key)

    def _read_in(self, tx: Transaction, change: Change, key: str, wanted: Category | None,
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
        if self.store.lean_paths:
            written = write_lean(self, key, value, category, access_policy, retention_policy)
            if written is not FULL:
                return cast(MemoryEntry, written)
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

    def _write_in(self, tx: Transaction, record: AgentRecord, change: Change, actor: Actor,
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
        if used > record.quota_bytes:
            taken, freed = _cleanup(tx, self.agent_id, key, used - record.quota_bytes)
            if used - freed > record.quota_bytes:
                change.refuse(AgentMemoryError(
                    ErrorCode.QUOTA_EXCEEDED,
                    f"writing {key!r} needs {size} bytes; the agent's quota of "
                    f"{record.quota_bytes} bytes is full even after cleanup "
                    "(PREFERENCE entries are never removed to make room)"),
                    "write", key, cat, size)
                return None
            for category, victims in taken:  # each line before its entry goes
                change.brief_lines(EVICT, victims, forKey=key)
                tx.evict(self.agent_id, category, victims, key)
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
            seq=record.next_seq,  # the change's number (changes.py)
        )
        extra: dict[str, Any] = {} if old is None else {"previousBytes": old_size}
        if self.via is not None:
            extra["via"] = self.via
        change.line(WRITE if old is None else UPDATE, key, cat, size, **extra)
        tx.put(row)
        change.used = used
        return to_entry(row)

    # -- query ------------------------------------------------------------------

    def query_memory(self, filter: MemoryFilter | dict[str, Any] | None = None
                     ) -> list[MemoryEntry]:
        if self.store.lean_paths:
            answer = query_lean(self, filter)
            if answer is not FULL:
                return cast("list[MemoryEntry]", answer)
        actor = self._require_actor("query")
        wanted = MemoryFilter.parse(filter)
        store = self.store
        store.purge_expired(self.agent_id)
        now = store.clock.now_us()
        # Usually the first page answers: it is one statement, so one snapshot,
        # and needs no transaction (PostgreSQL: no BEGIN and COMMIT round trips).
        # The first page is sized by the limit (an index serves it in recency
        # order), so asking for the newest ten costs ten rows however many match.
        with store.backend.peek() as tx:
            found = self._collect(tx, wanted, actor, now, min(wanted.limit, NEWEST_PAGE))
        if found is None:  # more pages: all of them from one snapshot
            with store.backend.read() as tx:
                found = self._collect(tx, wanted, actor, now, None)
        assert found is not None  # without a page bound it always answers
        return found

    def _collect(self, tx: Transaction, wanted: ParsedFilter, actor: Actor, now: int,
                 most: int | None) -> list[MemoryEntry] | None:
        """The query's answer from ``tx``; ``None`` if it needs more than the
        first ``most`` rows (and so more than the one statement of the first page)."""
        found: list[MemoryEntry] = []
        total = 0
        rows: Iterator[Row] = tx.iter_newest(
            self.agent_id, category=wanted.category, key_prefix=wanted.key_prefix,
            since_us=wanted.since_us, until_us=wanted.until_us, first=wanted.limit)
        for scanned, row in enumerate(rows, 1):
            if (row.expires_us is None or row.expires_us > now) and scope_allows(
                    row.access.read_scope, actor, row.created_by, row.creator_domain):
                total += row.size
                if total > MAX_QUERY_BYTES:
                    raise invalid(
                        "the matching entries are larger than 4 MiB in total: lower limit or "
                        "narrow the filter")
                found.append(to_entry(row))
                if len(found) >= wanted.limit:
                    return found
            if scanned == most:
                return None  # the page is used up and more rows may follow
        return found

    def pick_memory(self, key_prefix: str, pick: Callable[[MemoryEntry], T | None],
                    count: int | None) -> list[T]:
        """Up to ``count`` non-``None`` answers of ``pick`` over the entries under
        ``key_prefix`` this gene may read, newest first, from one snapshot: what
        ``query_memory`` answers, read only until ``count`` are kept and without
        its 1000-entry and 4 MiB bounds (:mod:`rotifer.memory.scan`; for
        integrations such as the LangGraph store, not a gene's call)."""
        actor = self._require_actor("query")
        return pick_newest(self.store, self.agent_id, key_prefix, lambda row: scope_allows(
            row.access.read_scope, actor, row.created_by, row.creator_domain), pick, count)

    # -- delete -----------------------------------------------------------------

    def delete_memory(self, key: str) -> None:
        actor = self._require_actor("delete", key)
        check_key(key)
        if self.store.surely_absent(self.agent_id, key):
            raise AgentMemoryError(ErrorCode.NOT_FOUND, f"no memory entry {key!r}")
        self.store.change(self.agent_id, actor.gene_id,
                          lambda tx, rec, ch: self._delete_in(tx, rec, ch, actor, key), key)

    def _delete_in(self, tx: Transaction, record: AgentRecord, change: Change, actor: Actor,
                   key: str) -> None:
        row = change.row
        if row is None:
            change.error = AgentMemoryError(ErrorCode.NOT_FOUND, f"no memory entry {key!r}")
            return
        if not scope_allows(row.access.write_scope, actor, row.created_by, row.creator_domain):
            change.refuse(denied(
                f"gene may not delete {key!r}: its writeScope is {row.access.write_scope.value}"),
                "delete", key, row.category)
            return
        if self.via is not None:
            change.line(DELETE, key, row.category, row.size, via=self.via)
        else:
            change.line(DELETE, key, row.category, row.size)
        tx.delete(self.agent_id, [key])
        change.used = record.used_bytes - row.size


def _cleanup(tx: Transaction, agent_id: str, writing: str, need: int
             ) -> tuple[list[tuple[Category, list[Brief]]], int]:
    """The entries to evict to free ``need`` bytes, by category, and the bytes
    they free: CACHE, then PATTERN, then CONTEXT, each least recently updated
    first.  Never PREFERENCE, never the entry being written (its old bytes are
    already counted as freed).  If they all free less than ``need``, all of them
    (the caller refuses)."""
    taken: list[tuple[Category, list[Brief]]] = []
    freed = 0
    for category in EVICTION_ORDER:
        victims = tx.oldest_to_free(agent_id, category, need - freed, writing)
        if victims:
            taken.append((category, victims))
            freed += sum(v.size for v in victims)
            if freed >= need:
                break
    return taken, freed
