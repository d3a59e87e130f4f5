"""Opening a store: no locks that wait for other agents' writes, versioned schema steps.

Every CLI command and every ``run_agent`` opens a store, so opening must cost
one cheap read of the schema version and never queue behind a write in
progress (a ``CREATE INDEX IF NOT EXISTS`` on every open waited for every
writer and made all agents' writes queue behind it).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from rotifer.memory import MemoryStore
from rotifer.memory.audit import AuditLog
from rotifer.memory.model import DataPolicy
from rotifer.memory.storage.backend import AgentRecord, Row
from rotifer.memory.storage.postgres import PostgresBackend
from rotifer.memory.storage.postgres import schema as pg_schema
from rotifer.memory.storage.sqlite import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION
from rotifer.memory.storage.sqlite import SqliteBackend

from .conftest import StoreFactory
from .helpers import gene_id
from .test_postgres_backend import row as _row


def row(agent_id: str, key: str) -> Row:
    return _row(key, seq=1, agent_id=agent_id, value=b"vv")


def _agent(agent_id: str) -> AgentRecord:
    return AgentRecord(agent_id, 10**6, DataPolicy(), 0, 1)


@pytest.mark.postgres
def test_opening_a_store_does_not_wait_for_a_write_in_progress(pg_fresh_url: str,
                                                               tmp_path: Path) -> None:
    holder = PostgresBackend(pg_fresh_url)
    with holder.write("a") as tx:
        tx.insert_agent(_agent("a"))
    with holder.write("a") as tx:  # a write on agent "a", held open
        tx.put(row("a", "k"))
        tx.update_agent("a", 3, 2, 0)
        # A lock wait of 300 ms fails the open if it queues behind the write above.
        other = PostgresBackend(pg_fresh_url, lock_timeout_ms=300)
        store = MemoryStore(other, _audit(tmp_path))
        store.create_agent("b")
        store.for_gene("b", gene_id("g"), "d").write_memory("d/k", b"v", "PATTERN")
        other.close()
    holder.close()


def _audit(tmp_path: Path) -> AuditLog:
    return AuditLog(tmp_path / "audit.jsonl")


def test_opening_sqlite_does_not_wait_for_a_write_in_progress(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    holder = SqliteBackend(path)
    with holder.write("a") as tx:
        tx.insert_agent(_agent("a"))
        other = SqliteBackend(path, busy_timeout_s=0.3)  # fails if it needs the write lock
        other.close()
    holder.close()


@pytest.mark.postgres
def test_a_missing_step_is_applied_once_under_the_lock(pg_fresh_url: str) -> None:
    """A database at an older version gets exactly the missing steps."""
    PostgresBackend(pg_fresh_url).close()
    with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
        conn.execute("UPDATE memory_meta SET value = '0' WHERE name = 'schema_version'")
        conn.execute("DROP INDEX memory_entries_expiry")
    PostgresBackend(pg_fresh_url).close()
    with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
        version = conn.execute("SELECT value FROM memory_meta "
                               "WHERE name = 'schema_version'").fetchone()
        assert version == (str(pg_schema.SCHEMA_VERSION),)
        assert conn.execute("SELECT to_regclass('memory_entries_expiry')").fetchone() != (None,)


def test_sqlite_records_its_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    SqliteBackend(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_SCHEMA_VERSION,)


def test_stores_open_on_both_backends_after_a_reopen(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.create_agent("a")
    store.close()
    again = store_factory()
    assert again.agents() == ["a"]
