"""The SQL of each operation inside one SQLite transaction (the reading
statements are shared with PostgreSQL: :mod:`rotifer.memory.sql_transaction`)."""

from __future__ import annotations

import sqlite3
from typing import Any

from ..backend import AGENT_COLUMNS, AgentRecord, Row, put_sql
from ..errors import storage
from ..sql_transaction import SqlTransaction, Statements
from .rows import make_row, row_params

PUT_SQL = put_sql("?")
DELETE_CHUNK = 500


class SqliteTransaction(SqlTransaction):
    """:class:`~rotifer.memory.backend.Transaction` over one sqlite3 connection."""

    __slots__ = ("conn",)

    sql = Statements.using("?")
    make_row = staticmethod(make_row)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, params).fetchone()
        return row

    def _all(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

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

    def log_lines(self, agent_id: str, seq: int, lines: list[str]) -> None:
        """SQLite keeps no copy: the one ``audit.jsonl`` beside it is the record."""

    def audit_lines(self, agent_id: str) -> list[dict[str, Any]] | None:
        return None
