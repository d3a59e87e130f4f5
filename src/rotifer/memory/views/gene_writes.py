"""A gene's write and delete (``write_memory``, ``delete_memory``), and the
cleanup a write over quota runs.

The write rule is here once: who may change an entry (its ``writeScope``,
:func:`~rotifer.memory.policy.scope_allows`), who may change its policies
(its creator), what the written row holds (:meth:`GeneWrites._written_row`)
and what its audit line says (:meth:`GeneWrites._write_line`).  The full path
(``_write_in``, run by :meth:`Engine.change
<rotifer.memory.engine.core.Engine.change>`) and the lean one
(``_write_lean``, see :mod:`.gene_view`) both use them.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, cast

from ..audit.actions import DELETE, EVICT, UPDATE, WRITE
from ..engine.changes import Change, log_change, settle, to_entry
from ..errors import AgentMemoryError, ErrorCode, denied
from ..model import (
    DEFAULT_ACCESS_POLICY,
    EVICTION_ORDER,
    MAX_VALUE_BYTES,
    UNSET,
    AccessPolicy,
    Category,
    MemoryEntry,
    RetentionPolicy,
    Unset,
    check_key,
    check_value,
    parse_category,
    parse_retention,
)
from ..policy import Actor, check_fits_data_policy, expires_at, scope_allows
from ..storage.backend import AgentRecord, Brief, Row, Transaction, new_row
from ..storage.rows import CATEGORIES
from .gene_view import FULL, Full, GeneView, GoFull


class GeneWrites(GeneView):
    """``write_memory`` and ``delete_memory`` of a gene's view."""

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
            written = self._write_lean(key, value, category, access_policy, retention_policy)
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

    def _written_row(self, actor: Actor, key: str, cat: Category, data: bytes, now: int,
                     old: Row | None, access: AccessPolicy, retention: RetentionPolicy | None,
                     record: AgentRecord) -> Row:
        """The row a write stores: a new entry is the writer's, made now; an
        update keeps who made it, where and when; either is the change's number."""
        return new_row(
            agent_id=self.agent_id, key=key, category=cat, value=data,
            created_by=actor.gene_id if old is None else old.created_by,
            creator_domain=actor.domain if old is None else old.creator_domain,
            last_accessed_by=actor.gene_id,
            created_us=now if old is None else old.created_us,
            updated_us=now, access=access, retention=retention,
            expires_us=expires_at(now, retention, record.data_policy),
            seq=record.next_seq,  # the change's number (engine/changes.py)
        )

    def _write_line(self, change: Change, key: str, cat: Category, size: int,
                    old: Row | None) -> None:
        """The write's audit line: ``write`` or ``update`` (with the bytes it
        replaced), and how the call came (``via``) if not from the gene's code."""
        extra: dict[str, Any] = {} if old is None else {"previousBytes": old.size}
        if self.via is not None:
            extra["via"] = self.via
        change.line(WRITE if old is None else UPDATE, key, cat, size, **extra)

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

        row = self._written_row(actor, key, cat, data, change.now_us, old, new_access,
                                new_retention, record)
        self._write_line(change, key, cat, size, old)
        tx.put(row)
        change.used = used
        return to_entry(row)

    def _write_lean(self, key: object, value: object, category: object,
                    access_policy: object, retention_policy: object) -> MemoryEntry | Full:
        """``write_memory`` without a refusal by scope, expiry or a policy change; a
        write that needs room goes on, from its lookup, with the full path's body
        (``_write_in``, by :meth:`Engine.change_holding
        <rotifer.memory.engine.core.Engine.change_holding>`) in its transaction.

        What it skips, and why that is safe: the policies are not parsed (it
        runs only when none are given: a new entry gets the defaults, which
        every data policy allows; an update keeps the stored ones, so nothing
        needs checking again); the key and value are checked once
        (``check_key``, the same errors as the full path).  The statements are
        the full path's (``lookup_holding``, ``put``, ``log_lines``, the
        append, ``update_agent``, commit), in its order; a failure after the
        append is settled as the full path settles it (``rolled_back`` if not
        committed)."""
        actor = self.actor
        if actor is None or access_policy is not None or retention_policy is not UNSET:
            return FULL
        size = len(check_key(key))  # raises what the full path raises, before anything
        if value.__class__ is not bytes or (category.__class__ is not str
                                            and category.__class__ is not Category):
            return FULL
        data = value
        cat = category if category.__class__ is Category else CATEGORIES.get(category)
        if cat is None or len(data) > MAX_VALUE_BYTES:
            return FULL
        key = cast(str, key)  # check_key passed
        size += len(data)
        store, agent, gene = self.store, self.agent_id, actor.gene_id
        change = Change(agent, actor=gene)
        handed: MemoryEntry | Full | None = FULL  # FULL: not handed to the full body
        try:
            with store.backend.write(agent) as tx:
                opened, clock_now = tx.lookup_holding(agent, key, store.clock)
                if opened is None:
                    raise GoFull  # no agent: the full path says so
                record, stale, old = opened
                if stale:
                    raise GoFull  # something to purge first
                store.begin(change, record, clock_now)
                if old is None:
                    access = DEFAULT_ACCESS_POLICY
                else:
                    access = old.access
                    if not scope_allows(access.write_scope, actor, old.created_by,
                                        old.creator_domain):
                        raise GoFull  # refused: the full path audits it
                used = record.used_bytes - (0 if old is None else old.size) + size
                if used > record.quota_bytes:
                    # Eviction (or refusal): the full path's body, from this lookup
                    # in this transaction (no rollback, no second lookup).
                    handed = store.change_holding(
                        tx, change, opened, clock_now,
                        lambda t, r, c: self._write_in(t, r, c, actor, key, data, cat, None,
                                                       UNSET))
                else:
                    row = self._written_row(actor, key, cat, data, change.now_us, old, access,
                                            None if old is None else old.retention, record)
                    self._write_line(change, key, cat, size, old)
                    tx.put(row)
                    head = log_change(tx, store.audit, agent, record.next_seq, change.lines,
                                      change)
                    tx.update_agent(agent, used, record.next_seq + 1, change.now_us, head)
        except GoFull:
            return FULL
        except BaseException as exc:
            if change.logged:
                settle(store.backend, store.audit, store.clock, change, exc)
            raise
        if handed is not FULL:
            return cast(MemoryEntry, store.changed(change, handed))
        return to_entry(row)

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


#: A Brief's size (``Brief.size``, by position: no Python step per victim).
_SIZE = itemgetter(2)


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
            freed += sum(map(_SIZE, victims))
            if freed >= need:
                break
    return taken, freed
