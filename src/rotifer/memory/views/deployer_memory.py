"""The deployer's view of an agent's memory, and the memory of a gene outside
any agent (every call refused).

The deployer lists without values and deletes whatever the policies say; its
changes are audited with actor ``deployer``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import Any, TypeVar

from ..audit import DEPLOYER, AuditLog
from ..audit.actions import ACCESS_DENIED, DEPLOYER_DELETE
from ..audit.text import audit_line
from ..clock import format_time
from ..engine.changes import Change, to_entry
from ..engine.core import Engine
from ..errors import AgentMemoryError, ErrorCode, denied, invalid
from ..filters import MemoryFilter
from ..model import (
    UNSET,
    AccessPolicy,
    Category,
    MemoryEntry,
    RetentionPolicy,
    Unset,
    check_key,
    parse_category,
)
from ..storage.backend import NEWEST_PAGE, AgentRecord, Row, Transaction
from .scan import pick_newest

T = TypeVar("T")


def _any_row(row: Row) -> bool:
    return True


class DeployerMemory:
    """The agent owner's view: list without values, delete whatever the policies say."""

    def __init__(self, store: Engine, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id

    def list(self, category: Category | str | None = None, *, key_prefix: str | None = None
             ) -> list[MemoryEntry]:
        """Every live entry (most recently updated first), or those of ``category``
        and/or whose key starts with ``key_prefix`` (a plain prefix, compared as
        queries compare it); callers must not print values."""
        wanted = None if category is None else parse_category(category)
        if key_prefix is not None and not isinstance(key_prefix, str):
            raise invalid("keyPrefix must be a string")
        self.store.purge_expired(self.agent_id)
        now = self.store.clock.now_us()  # a read-only standby cannot purge: hide them here
        with self.store.backend.read() as tx:
            return [to_entry(r) for r in tx.iter_newest(self.agent_id, category=wanted,
                                                         key_prefix=key_prefix)
                    if r.expires_us is None or r.expires_us > now]

    def pick(self, key_prefix: str, pick: Callable[[MemoryEntry], T | None],
             count: int | None) -> builtins.list[T]:
        """Up to ``count`` non-``None`` answers of ``pick`` over the live entries
        under ``key_prefix``, newest first, read only until ``count`` are kept
        (:mod:`rotifer.memory.views.scan`); ``pick`` sees values, so it must not print them."""
        return pick_newest(self.store, self.agent_id, key_prefix, _any_row, pick, count)

    def read(self, key: str) -> MemoryEntry | None:
        """The live entry ``key`` whatever its policies (the owner may read
        everything), or ``None``.  Not logged, like a gene's read, and it leaves
        ``lastAccessedBy`` alone: that names the last *gene* to use the entry."""
        check_key(key)
        self.store.purge_expired(self.agent_id)
        now = self.store.clock.now_us()
        with self.store.backend.peek() as tx:
            row = tx.get(self.agent_id, key)
        if row is None or (row.expires_us is not None and row.expires_us <= now):
            return None
        return to_entry(row)

    def page(self, category: Category | str | None = None, after: str | None = None,
             limit: int | None = None) -> tuple[builtins.list[MemoryEntry], str | None]:
        """Live entries in key order, those after the key ``after``, at most
        ``limit`` of them (all without one); and the last key listed if more
        follow (the next page's ``after``), else ``None``.  Callers must not
        print values.  The first page reads ``limit`` + 1 rows on the key index,
        however many entries the agent has."""
        wanted = None if category is None else parse_category(category)
        if after is not None:
            check_key(after)
        if limit is not None and limit < 1:
            raise invalid(f"limit must be a whole number of 1 or more, not {limit}")
        self.store.purge_expired(self.agent_id)
        with self.store.backend.read() as tx:
            rows = tx.iter_by_key(self.agent_id, category=wanted, after=after,
                                  first=NEWEST_PAGE if limit is None else limit + 1)
            entries = [to_entry(r) for r in (rows if limit is None else islice(rows, limit + 1))]
        if limit is not None and len(entries) > limit:
            del entries[limit:]
            return entries, entries[-1].key
        return entries, None

    def delete_key(self, key: str) -> int:
        check_key(key)
        if self.store.surely_absent(self.agent_id, key):
            raise AgentMemoryError(ErrorCode.NOT_FOUND, f"no memory entry {key!r}")

        def body(tx: Transaction, record: AgentRecord, change: Change) -> int:
            row = change.row
            if row is None:
                change.error = AgentMemoryError(ErrorCode.NOT_FOUND, f"no memory entry {key!r}")
                return 0
            return _deployer_delete(tx, record, change, [row])

        return self.store.change(self.agent_id, DEPLOYER, body, key)

    def delete_category(self, category: Category | str, *,
                        expect: tuple[int, int] | None = None) -> int:
        """Remove every entry of ``category``.  With ``expect`` (the count and bytes a
        confirmation showed), only if the category still holds exactly that, checked
        in the deleting transaction: else MEMORY_INVALID_INPUT saying what it holds
        now, and nothing is removed."""
        wanted = parse_category(category)

        def body(tx: Transaction, record: AgentRecord, change: Change) -> int:
            rows = list(tx.iter_newest(self.agent_id, category=wanted))
            now = (len(rows), sum(r.size for r in rows))
            if expect is not None and now != tuple(expect):
                change.error = Changed(
                    f"{wanted.value} holds {_amount(*now)} now, not the "
                    f"{_amount(*expect)} confirmed; nothing was deleted", [])
                return 0
            return _deployer_delete(tx, record, change, rows)

        return self.store.change(self.agent_id, DEPLOYER, body)

    def delete_some(self, limit: int = 500) -> int:
        """Remove up to ``limit`` entries, whatever their category or policies, in one
        transaction (each audited like :meth:`delete_key`); how many.  Called until it
        returns 0, it empties a memory of any size in small commits, so an interrupted
        ``rotifer agent delete`` keeps what it removed and can simply be run again."""

        def body(tx: Transaction, record: AgentRecord, change: Change) -> int:
            rows = list(islice(tx.iter_newest(self.agent_id), limit))
            return _deployer_delete(tx, record, change, rows)

        return self.store.change(self.agent_id, DEPLOYER, body)

    def delete_keys(self, keys: Sequence[str], *,
                    expect: Mapping[str, int] | None = None) -> int:
        """Remove a selection of entries in one change, audited like :meth:`delete_key`
        (one ``deployer_delete`` line each).  All or nothing: a key with no entry
        (deleted or expired since it was selected) is MEMORY_NOT_FOUND naming it,
        and nothing is removed.  With ``expect`` (key -> the entry's ``seq`` a
        confirmation showed), an entry written since is :class:`Changed` naming
        the keys, and nothing is removed."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            raise invalid("no keys selected")
        for key in wanted:
            check_key(key)

        def body(tx: Transaction, record: AgentRecord, change: Change) -> int:
            rows = []
            for key in wanted:
                row = tx.get(self.agent_id, key)
                if row is None:
                    change.error = AgentMemoryError(ErrorCode.NOT_FOUND, f"no memory entry {key!r}")
                    return 0
                rows.append(row)
            if expect is not None:
                changed = [r.key for r in rows if expect.get(r.key) != r.seq]
                if changed:
                    change.error = Changed(
                        f"{len(changed)} of the {len(rows)} entries changed since they "
                        "were confirmed; nothing was deleted", changed)
                    return 0
            return _deployer_delete(tx, record, change, rows)

        return self.store.change(self.agent_id, DEPLOYER, body)


class Changed(AgentMemoryError):
    """A confirmed deletion refused because the memory changed since the
    confirmation (MEMORY_INVALID_INPUT); ``keys``: the entries that changed."""

    def __init__(self, message: str, keys: builtins.list[str]) -> None:
        super().__init__(ErrorCode.INVALID_INPUT, message)
        self.keys = keys


def _amount(count: int, size: int) -> str:
    return f"{count:,} {'entry' if count == 1 else 'entries'} ({size:,} bytes)"


def _deployer_delete(tx: Transaction, record: AgentRecord, change: Change,
                     rows: list[Row]) -> int:
    for row in rows:
        change.line(DEPLOYER_DELETE, row.key, row.category, row.size, createdBy=row.created_by)
    if rows:
        tx.delete(record.agent_id, [r.key for r in rows])
        change.used = record.used_bytes - sum(r.size for r in rows)
    return len(rows)


class DeniedMemory:
    """Memory for a gene that runs outside any agent (``rotifer run``): every call
    is refused with MEMORY_ACCESS_DENIED, and recorded when an audit log is given."""

    def __init__(self, reason: str = "memory calls only work when the gene runs as part of an "
                 "agent", audit: AuditLog | None = None, actor: str | None = None) -> None:
        self.reason = reason
        self.audit = audit
        self.actor = actor

    def _refuse(self, operation: str, key: object = None) -> AgentMemoryError:
        error = denied(self.reason)
        if self.audit is not None:
            from ..clock import SystemClock

            ts = format_time(SystemClock().now_us())
            line = audit_line(ts, None, ACCESS_DENIED, key if isinstance(key, str) else None,
                              actor=self.actor, extra={"operation": operation,
                                                       "code": error.code.value,
                                                       "reason": self.reason})
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
