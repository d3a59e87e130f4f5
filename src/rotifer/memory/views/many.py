"""Many reads, or many changes, of one gene in one go.

An integration that gathers many calls (the LangGraph store's ``abatch``)
would pay one statement per read and one transaction per change -- on
PostgreSQL a round trip or three each.  These two functions give it the same
calls, each with every rule it has alone, in a handful of statements:

* :func:`read_many` -- ``read_memory`` of each key.  One statement reads every
  entry (in chunks of :data:`CHUNK` keys); an entry that the gene may read and
  that it was the last to read is answered from it.  Every other key (one whose
  entry expired meanwhile, one the gene may not read, one whose
  ``lastAccessedBy`` must change) is read the full way, ``read_memory`` itself,
  which audits a refusal and notes the reader.
* :func:`change_many` -- ``write_memory`` / ``delete_memory`` of each op, in
  order, each its own change exactly as the call alone makes it (the same
  bodies run through :meth:`MemoryStore.change
  <rotifer.memory.store.MemoryStore.change>`: its number, time, write-ahead
  audit lines, quota and cleanup, scopes, data policy, and its
  ``rolled_back`` line if it does not commit), each in its own transaction.
  What costs nothing alone costs nothing here: one statement looks up every
  key first, and a delete of a key that is not there (nor written earlier in
  the batch) is MEMORY_NOT_FOUND without a transaction, as ``delete_memory``
  answers it after its own lock-free lookup.  A refusal (a scope, the quota,
  a missing entry, bad input, the store failing that change) is that op's
  outcome and the others go on; an interrupt goes through.

  Why not one transaction for all of them: the audit log is read (``audit
  verify``, the history) as changes settled in number order -- change N+1's
  lines mean change N committed, unless a ``rolled_back`` line for N came
  first.  Changes sharing one transaction would append N+1's lines before N
  is settled, and a failed commit could not be told in the log.

Both answer one outcome per key or op, in order: the entry (``None`` for a
read of nothing and for a delete), or the :class:`AgentMemoryError` that op
raised alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, NamedTuple

from ..context import audit_context
from ..engine.changes import Change, to_entry
from ..errors import AgentMemoryError, ErrorCode
from ..model import (
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
from ..policy import Actor, scope_allows
from ..storage.backend import AgentRecord, Row, Transaction
from ..storage.sql_text import ROW_COLUMNS
from ..storage.sql_transaction import SqlTransaction

if TYPE_CHECKING:
    from .gene_memory import GeneMemory

#: Keys per statement of :func:`rows_of` (well under SQLite's variable limit).
CHUNK = 500


class Write(NamedTuple):
    """``write_memory(key, value, category, access_policy, retention_policy)``."""

    key: str
    value: bytes
    category: Category | str
    access_policy: AccessPolicy | dict[str, Any] | None = None
    retention_policy: RetentionPolicy | dict[str, Any] | Unset | None = UNSET


class Delete(NamedTuple):
    """``delete_memory(key)``."""

    key: str


Outcome = MemoryEntry | None | AgentMemoryError
Body = Callable[[Transaction, AgentRecord, Change], Any]


def rows_of(tx: Transaction, agent_id: str, keys: Sequence[str]) -> dict[str, Row]:
    """The stored entries (expired or not) of ``keys``, by key: one statement
    per :data:`CHUNK` keys on the SQL backends, a lookup per key elsewhere."""
    wanted = list(dict.fromkeys(keys))
    if not isinstance(tx, SqlTransaction):
        return {key: row for key in wanted if (row := tx.get(agent_id, key)) is not None}
    if tx.checks_text:
        if not tx._storable(agent_id):
            return {}
        wanted = [key for key in wanted if tx._storable(key)]  # else stored nowhere
    p = tx.sql.placeholder
    found: dict[str, Row] = {}
    for start in range(0, len(wanted), CHUNK):
        part = wanted[start:start + CHUNK]
        sql = (f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE agent_id = {p} "
               f"AND key IN ({', '.join([p] * len(part))})")
        for r in tx._all(sql, (agent_id, *part)):
            row = tx.make_row(r)
            found[row.key] = row
    return found


def read_many(memory: GeneMemory, keys: Sequence[str]) -> list[Outcome]:
    """``memory.read_memory(key)`` of each key (see the module's text)."""
    outcomes: list[Outcome] = [None] * len(keys)
    full: list[int] = []
    actor = memory.actor
    if actor is None:
        full = list(range(len(keys)))  # each refused, and audited, the full way
    else:
        valid: list[int] = []
        for n, key in enumerate(keys):
            try:
                check_key(key)
            except AgentMemoryError as exc:
                outcomes[n] = exc
                continue
            valid.append(n)
        store = memory.store
        store.purge_expired(memory.agent_id)  # as a read that finds anything expired
        now = store.clock.now_us()
        with store.backend.peek() as tx:
            rows = rows_of(tx, memory.agent_id, [keys[n] for n in valid])
        for n in valid:
            row = rows.get(keys[n])
            if row is None:
                continue
            if (row.expires_us is not None and row.expires_us <= now) \
                    or row.last_accessed_by != actor.gene_id or not scope_allows(
                        row.access.read_scope, actor, row.created_by, row.creator_domain):
                full.append(n)
            else:
                outcomes[n] = to_entry(row)
    for n in full:
        try:
            outcomes[n] = memory.read_memory(keys[n])
        except AgentMemoryError as exc:
            outcomes[n] = exc
    return outcomes


def change_many(memory: GeneMemory, ops: Sequence[Write | Delete],
                contexts: Sequence[Mapping[str, object] | None] | None = None
                ) -> list[Outcome]:
    """Each op as ``write_memory`` or ``delete_memory`` would make it, in order
    (see the module's text).  ``contexts`` (one per op)
    names the run each change is made for on its audit lines
    (:func:`~rotifer.memory.context.audit_context`); without it, the caller's."""
    if contexts is not None and len(contexts) != len(ops):
        raise ValueError("one context per op")
    outcomes: list[Outcome] = [None] * len(ops)
    actor = memory.actor
    calls: list[tuple[int, str, Body]] = []
    for n, op in enumerate(ops):
        try:
            if actor is None:  # refused (and audited) as the call alone is
                if isinstance(op, Write):
                    memory.write_memory(*op)
                else:
                    memory.delete_memory(op.key)
                continue  # pragma: no cover - refused above
            check_key(op.key)
            if isinstance(op, Write):
                data = check_value(op.value)
                cat = parse_category(op.category)
                access = None if op.access_policy is None else AccessPolicy.parse(
                    op.access_policy)
                retention: RetentionPolicy | Unset | None = (
                    UNSET if op.retention_policy is UNSET
                    else parse_retention(op.retention_policy))
                body = _writer(memory, actor, op.key, data, cat, access, retention)
            else:
                body = _deleter(memory, actor, op.key)
        except AgentMemoryError as exc:
            outcomes[n] = exc
            continue
        calls.append((n, op.key, body))
    if not calls:
        return outcomes
    assert actor is not None
    store = memory.store
    # One statement answers every delete of a key that is not there (as
    # ``surely_absent`` answers one): no agent change, so no transaction.
    keys = [key for _, key, _ in calls]
    now = store.clock.now_us()
    with store.backend.peek() as tx:
        opened = tx.lookup(memory.agent_id, None, now)
        present = rows_of(tx, memory.agent_id, keys) if opened is not None else {}
    settled = opened is not None and not opened[1]  # the agent, nothing expired
    written: set[str] = set()
    for n, key, body in calls:
        if isinstance(ops[n], Delete) and settled and key not in present \
                and key not in written:
            outcomes[n] = AgentMemoryError(ErrorCode.NOT_FOUND, f"no memory entry {key!r}")
            continue
        written.add(key)
        try:
            with nullcontext() if contexts is None else audit_context(contexts[n]):
                outcomes[n] = store.change(memory.agent_id, actor.gene_id, body, key)
        except AgentMemoryError as exc:
            outcomes[n] = exc
    return outcomes


def _writer(memory: GeneMemory, actor: Actor, key: str, data: bytes, cat: Category,
            access: AccessPolicy | None, retention: RetentionPolicy | Unset | None) -> Body:
    def body(tx: Transaction, record: AgentRecord, change: Change) -> MemoryEntry | None:
        return memory._write_in(tx, record, change, actor, key, data, cat, access, retention)
    return body


def _deleter(memory: GeneMemory, actor: Actor, key: str) -> Body:
    def body(tx: Transaction, record: AgentRecord, change: Change) -> None:
        memory._delete_in(tx, record, change, actor, key)
    return body
