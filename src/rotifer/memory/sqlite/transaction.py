"""The SQL of each operation inside one SQLite transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from ..backend import (
    AGENT_COLUMNS,
    FIRST_PAGE,
    LOOKUP_ROW_AT,
    ROW_COLUMNS,
    AgentRecord,
    Brief,
    Row,
    browse_sql,
    category_usage_sql,
    expired_sql,
    lookup_sql,
    newest_after,
    newest_sql,
    oldest_sql,
    pages,
    put_sql,
)
from ..errors import storage
from ..model import Category
from .rows import make_agent, make_brief, make_row, row_params

PUT_SQL = put_sql("?")
LOOKUP_SQL = lookup_sql("?")
EXPIRED_SQL, EXPIRED_AFTER = expired_sql("?")
OLDEST_SQL, OLDEST_AFTER = oldest_sql("?")
NEWEST_AFTER = newest_after("?")
CATEGORY_USAGE_SQL = category_usage_sql("?")
DELETE_CHUNK = 500


class SqliteTransaction:
    """:class:`~rotifer.memory.backend.Transaction` over one sqlite3 connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, params).fetchone()
        return row

    def get_agent(self, agent_id: str) -> AgentRecord | None:
        r = self._one(f"SELECT {AGENT_COLUMNS} FROM memory_agents WHERE agent_id = ?",
                      (agent_id,))
        return None if r is None else make_agent(r)

    def list_agents(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT agent_id FROM memory_agents ORDER BY agent_id")]

    def insert_agent(self, record: AgentRecord) -> None:
        self.conn.execute(
            f"INSERT INTO memory_agents ({AGENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (record.agent_id, record.quota_bytes, record.data_policy.max_retention_days,
             int(record.data_policy.anonymization_supported), record.used_bytes, record.next_seq,
             record.last_us))

    def update_agent(self, agent_id: str, used_bytes: int, next_seq: int, last_us: int
                     ) -> None:
        cur = self.conn.execute(
            "UPDATE memory_agents SET used_bytes = ?, next_seq = ?, last_us = ? "
            "WHERE agent_id = ?", (used_bytes, next_seq, last_us, agent_id))
        if cur.rowcount != 1:
            raise storage(f"agent {agent_id!r} has no memory")

    def delete_agent(self, agent_id: str) -> None:
        self.conn.execute("DELETE FROM memory_entries WHERE agent_id = ?", (agent_id,))
        self.conn.execute("DELETE FROM memory_agents WHERE agent_id = ?", (agent_id,))

    def get(self, agent_id: str, key: str) -> Row | None:
        r = self._one(f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE agent_id = ? AND key = ?",
                      (agent_id, key))
        return None if r is None else make_row(r)

    def lookup(self, agent_id: str, key: str | None, now_us: int
               ) -> tuple[AgentRecord, bool, Row | None] | None:
        r = self._one(LOOKUP_SQL, (now_us, key, agent_id))
        if r is None:
            return None
        at = LOOKUP_ROW_AT
        return make_agent(r[:at - 1]), bool(r[at - 1]), None if r[at] is None else make_row(r[at:])

    def put(self, row: Row) -> None:
        # An upsert, not INSERT OR REPLACE: replacing deletes the old row and
        # inserts a new one (every index entry twice, a 10 KiB value's overflow
        # pages freed and allocated again); updating in place is much cheaper.
        self.conn.execute(PUT_SQL, row_params(row))

    def touch(self, agent_id: str, key: str, gene_id: str) -> None:
        self.conn.execute(
            "UPDATE memory_entries SET last_accessed_by = ? WHERE agent_id = ? AND key = ?",
            (gene_id, agent_id, key))

    def touch_if(self, agent_id: str, key: str, gene_id: str, seq: int, now_us: int) -> bool:
        """One autocommit statement (see the backend interface); it takes the
        file's write lock for its moment, as any change does."""
        cur = self.conn.execute(
            "UPDATE memory_entries SET last_accessed_by = ? WHERE agent_id = ? AND key = ? "
            "AND seq = ? AND (expires_us IS NULL OR expires_us > ?)",
            (gene_id, agent_id, key, seq, now_us))
        return cur.rowcount == 1

    def delete(self, agent_id: str, keys: list[str]) -> None:
        # A statement per chunk of keys, not per key: an eviction of 100 entries
        # is one DELETE.
        for start in range(0, len(keys), DELETE_CHUNK):
            chunk = keys[start:start + DELETE_CHUNK]
            self.conn.execute(
                "DELETE FROM memory_entries WHERE agent_id = ? AND key IN "
                f"({', '.join('?' * len(chunk))})", (agent_id, *chunk))

    def _all(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def iter_expired(self, agent_id: str, now_us: int) -> Iterator[Brief]:
        for r in pages(self._all, EXPIRED_SQL, (agent_id, now_us), EXPIRED_AFTER,
                       lambda r: (r[0], r[5]), FIRST_PAGE):
            yield make_brief(r[1:])

    def iter_oldest(self, agent_id: str, category: Category) -> Iterator[Brief]:
        for r in pages(self._all, OLDEST_SQL, (agent_id, category.value), OLDEST_AFTER,
                       lambda r: (r[3], r[4]), FIRST_PAGE):
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
        sql, params = newest_sql("?", agent_id, category, key_prefix, since_us, until_us)
        for r in pages(self._all, sql, params, NEWEST_AFTER, lambda r: (r[8], r[14])):
            row = make_row(r)
            if key_prefix and not row.key.startswith(key_prefix):
                continue  # belt and braces: the range above is exact already
            yield row

    def count(self, agent_id: str) -> int:
        r = self._one("SELECT count(*) FROM memory_entries WHERE agent_id = ?", (agent_id,))
        return int(r[0]) if r else 0

    def browse(self, agent_id: str, **page: Any) -> list[tuple[Row, int]]:
        sql, params = browse_sql("?", "instr(lower(key), ?) > 0", agent_id, **page)
        return [(make_row(r[:-1]), r[-1]) for r in self.conn.execute(sql, params)]

    def category_usage(self, agent_id: str) -> dict[Category, tuple[int, int]]:
        return {Category(r[0]): (int(r[1]), int(r[2]))
                for r in self.conn.execute(CATEGORY_USAGE_SQL, (agent_id,))}

    def log_lines(self, agent_id: str, seq: int, lines: list[str]) -> None:
        """SQLite keeps no copy: the one ``audit.jsonl`` beside it is the record."""

    def audit_lines(self, agent_id: str) -> list[dict[str, Any]] | None:
        return None

    def sum_sizes(self, agent_id: str) -> int:
        r = self._one("SELECT coalesce(sum(size), 0) FROM memory_entries WHERE agent_id = ?",
                      (agent_id,))
        return int(r[0]) if r else 0


