"""The SQL of each backend operation, over one connection in a transaction.

Nothing here opens, retries or times out anything: :mod:`.backend` hands a
:class:`PostgresTransaction` a connection that is already in the right
transaction with the agent locked, and ends that transaction afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Final

import psycopg
from psycopg.types.json import Jsonb

from ..backend import (
    AGENT_COLUMNS,
    BRIEF_COLUMNS,
    LOOKUP_ROW_AT,
    ROW_COLUMNS,
    AgentRecord,
    Brief,
    Row,
    lookup_sql,
    newest_sql,
    put_sql,
)
from ..errors import MemoryError, damaged, storage
from ..model import AccessPolicy, Category, DataPolicy, RetentionPolicy, Scope, SharePolicy

Connection = psycopg.Connection[tuple[Any, ...]]

BATCH: Final = 256
#: The first page of the cleanup and expiry scans (they double from there).
FIRST_PAGE: Final = 16

PUT_SQL: Final = put_sql("%s")
LOOKUP_SQL: Final = lookup_sql("%s")
LOCK_AGENT_SQL: Final = "SELECT 1 FROM memory_agents WHERE agent_id = %s FOR UPDATE"


def storable(text: str) -> bool:
    """Can ``text`` be stored in a PostgreSQL text column at all?

    Keys and agent ids never contain NUL or lone surrogates (the store refuses
    them), so a lookup with one simply finds nothing -- as it does on SQLite --
    instead of failing to encode.
    """
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _retention_param(policy: RetentionPolicy | None) -> Jsonb | None:
    return None if policy is None else Jsonb(policy.to_json())


def row_params(row: Row) -> tuple[Any, ...]:
    return (
        row.agent_id, row.key, row.category.value, row.value, row.size, row.created_by,
        row.creator_domain, row.last_accessed_by, row.created_us, row.updated_us,
        row.access.read_scope.value, row.access.write_scope.value, row.access.share_policy.value,
        _retention_param(row.retention), row.expires_us, row.seq,
    )


def make_row(r: tuple[Any, ...]) -> Row:
    try:
        return Row(
            agent_id=r[0], key=r[1], category=Category(r[2]), value=bytes(r[3]),
            created_by=r[4], creator_domain=r[5], last_accessed_by=r[6], created_us=r[7],
            updated_us=r[8], access=AccessPolicy(Scope(r[9]), Scope(r[10]), SharePolicy(r[11])),
            retention=None if r[12] is None else RetentionPolicy.parse(r[12]),
            expires_us=r[13], seq=r[14],
        )
    except (ValueError, TypeError, MemoryError) as exc:  # e.g. a retention edited by hand
        raise damaged(f"an entry {r[1]!r}", exc) from None


def make_brief(r: tuple[Any, ...]) -> Brief:
    return Brief(key=r[0], category=Category(r[1]), size=r[2], updated_us=r[3], seq=r[4],
                 created_by=r[5])


def make_agent(r: tuple[Any, ...]) -> AgentRecord:
    return AgentRecord(r[0], r[1], DataPolicy(r[2], bool(r[3])), r[4], r[5], r[6])


class PostgresTransaction:
    """:class:`~rotifer.memory.backend.Transaction` over one psycopg connection."""

    __slots__ = ("_watch", "conn")

    def __init__(self, conn: Connection,
                 watch: tuple[Callable[[], None], Callable[[], None]] | None = None) -> None:
        self.conn = conn
        #: For a long-running transaction: (start, stop) watching one statement.
        self._watch = watch

    def _all(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if self._watch is None:
            return self.conn.execute(sql, params, binary=True).fetchall()
        self._watch[0]()
        try:
            return self.conn.execute(sql, params, binary=True).fetchall()
        finally:
            self._watch[1]()

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if self._watch is None:
            return self.conn.execute(sql, params, binary=True).fetchone()
        self._watch[0]()
        try:
            return self.conn.execute(sql, params, binary=True).fetchone()
        finally:
            self._watch[1]()

    def _run(self, sql: str, params: tuple[Any, ...]) -> int:
        if self._watch is None:
            return self.conn.execute(sql, params).rowcount
        self._watch[0]()
        try:
            return self.conn.execute(sql, params).rowcount
        finally:
            self._watch[1]()

    # -- agents ---------------------------------------------------------------

    def get_agent(self, agent_id: str) -> AgentRecord | None:
        if not storable(agent_id):
            return None
        r = self._one(f"SELECT {AGENT_COLUMNS} FROM memory_agents WHERE agent_id = %s",
                      (agent_id,))
        return None if r is None else make_agent(r)

    def list_agents(self) -> list[str]:
        return [r[0] for r in self._all("SELECT agent_id FROM memory_agents ORDER BY agent_id",
                                        ())]

    def insert_agent(self, record: AgentRecord) -> None:
        self._run(
            f"INSERT INTO memory_agents ({AGENT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (record.agent_id, record.quota_bytes, record.data_policy.max_retention_days,
             record.data_policy.anonymization_supported, record.used_bytes, record.next_seq,
             record.last_us))

    def update_agent(self, agent_id: str, used_bytes: int, next_seq: int, last_us: int
                     ) -> None:
        n = self._run("UPDATE memory_agents SET used_bytes = %s, next_seq = %s, last_us = %s "
                      "WHERE agent_id = %s", (used_bytes, next_seq, last_us, agent_id))
        if n != 1:
            raise storage(f"agent {agent_id!r} has no memory")

    def delete_agent(self, agent_id: str) -> None:
        self._run("DELETE FROM memory_entries WHERE agent_id = %s", (agent_id,))
        self._run("DELETE FROM memory_agents WHERE agent_id = %s", (agent_id,))

    # -- entries --------------------------------------------------------------

    def get(self, agent_id: str, key: str) -> Row | None:
        if not (storable(agent_id) and storable(key)):
            return None
        r = self._one(f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE agent_id = %s AND key = %s",
                      (agent_id, key))
        return None if r is None else make_row(r)

    def lookup(self, agent_id: str, key: str | None, now_us: int
               ) -> tuple[AgentRecord, bool, Row | None] | None:
        if not storable(agent_id):
            return None
        if key is not None and not storable(key):
            key = None  # no stored key contains NUL or a lone surrogate
        r = self._one(LOOKUP_SQL, (now_us, key, agent_id))
        if r is None:
            return None
        at = LOOKUP_ROW_AT
        return make_agent(r[:at - 1]), bool(r[at - 1]), None if r[at] is None else make_row(r[at:])

    def put(self, row: Row) -> None:
        self._run(PUT_SQL, row_params(row))

    def touch(self, agent_id: str, key: str, gene_id: str) -> None:
        self._run("UPDATE memory_entries SET last_accessed_by = %s WHERE agent_id = %s AND key = %s",
                  (gene_id, agent_id, key))

    def delete(self, agent_id: str, keys: list[str]) -> None:
        if keys:
            self._run("DELETE FROM memory_entries WHERE agent_id = %s AND key = ANY(%s)",
                      (agent_id, keys))

    def _pages(self, sql: str, params: tuple[Any, ...], after_sql: str,
               after_of: Any, first: int = BATCH) -> Iterator[tuple[Any, ...]]:
        """Keyset pagination: each page is fetched whole, so the caller may
        write between pages without disturbing an open cursor.  Pages start
        at ``first`` rows and double up to :data:`BATCH`."""
        after: tuple[Any, ...] = ()
        size = first
        while True:
            rows = self._all(sql.format(after=after_sql if after else "", limit=size),
                             params + after)
            yield from rows
            if len(rows) < size:
                return
            after = after_of(rows[-1])
            size = min(2 * size, BATCH)

    def iter_expired(self, agent_id: str, now_us: int) -> Iterator[Brief]:
        sql = (f"SELECT expires_us, {BRIEF_COLUMNS} FROM memory_entries WHERE agent_id = %s "
               "AND expires_us IS NOT NULL AND expires_us <= %s {after} "
               f"ORDER BY expires_us, seq LIMIT {{limit}}")
        for r in self._pages(sql, (agent_id, now_us), "AND (expires_us, seq) > (%s, %s)",
                             lambda r: (r[0], r[5]), FIRST_PAGE):
            yield make_brief(r[1:])

    def iter_oldest(self, agent_id: str, category: Category) -> Iterator[Brief]:
        sql = (f"SELECT {BRIEF_COLUMNS} FROM memory_entries WHERE agent_id = %s "
               f"AND category = %s {{after}} ORDER BY updated_us, seq LIMIT {{limit}}")
        for r in self._pages(sql, (agent_id, category.value),
                             "AND (updated_us, seq) > (%s, %s)", lambda r: (r[3], r[4]),
                             FIRST_PAGE):
            yield make_brief(r)

    def iter_newest(
        self,
        agent_id: str,
        *,
        category: Category | None = None,
        key_prefix: str | None = None,
        since_us: int | None = None,
        until_us: int | None = None,
    ) -> Iterator[Row]:
        if key_prefix and not storable(key_prefix):
            return  # no stored key contains NUL or a lone surrogate
        sql, params = newest_sql("%s", agent_id, category, key_prefix, since_us, until_us)
        for r in self._pages(sql, params, "AND (updated_us, seq) < (%s, %s)",
                             lambda r: (r[8], r[14])):
            row = make_row(r)
            if key_prefix and not row.key.startswith(key_prefix):
                continue  # belt and braces: the range above is exact already
            yield row

    def count(self, agent_id: str) -> int:
        r = self._one("SELECT count(*) FROM memory_entries WHERE agent_id = %s", (agent_id,))
        return int(r[0]) if r else 0

    def log_lines(self, agent_id: str, seq: int, lines: list[str]) -> None:
        """One statement for all of a change's lines; ids (commit order per agent,
        as the agent's row lock is held) come from the sequence."""
        self._run("INSERT INTO memory_audit (agent_id, seq, line) "
                  "SELECT %s, %s, unnest(%s::text[])", (agent_id, seq, lines))

    def audit_lines(self, agent_id: str) -> list[dict[str, Any]] | None:
        rows = self.conn.execute("SELECT line FROM memory_audit WHERE agent_id = %s "
                                 "ORDER BY id", (agent_id,)).fetchall()
        return [json.loads(r[0]) for r in rows]

    def sum_sizes(self, agent_id: str) -> int:
        r = self._one("SELECT coalesce(sum(size), 0)::bigint FROM memory_entries "
                      "WHERE agent_id = %s", (agent_id,))
        return int(r[0]) if r else 0
