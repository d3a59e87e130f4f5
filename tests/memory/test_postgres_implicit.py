"""A change on PostgreSQL sends no ``BEGIN`` and no ``COMMIT`` (issue 33).

Its first round trip (the agent's lock and lookup) ends with a ``Flush``,
which opens the extended protocol's implicit transaction; the ``Sync`` of its
last round trip commits it.  What that must not change, on a real server:

* a change that ends in an exception is rolled back, its lock released, and
  its connection goes back to the pool idle, to be used again;
* nothing of a change is visible before its ``Sync``;
* the lookup after the lock still runs at READ COMMITTED when the database
  makes another level the default (each connection sets its own).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import psycopg
import pytest

from rotifer.memory import AgentMemoryError, MemoryStore
from rotifer.memory.storage.postgres import transaction as pg_transaction
from rotifer.memory.storage.postgres.health import retryable
from rotifer.memory.storage.postgres.pipeline import pipelined

from .conftest import SchemaMaker
from .helpers import gene_id

pytestmark = pytest.mark.postgres

A = gene_id("a")


class Failing:
    """A clock that raises on its ``arm``-ed call: the change is then inside
    its transaction, holding the agent's row lock, with nothing appended."""

    def __init__(self) -> None:
        self.armed = False

    def now_us(self) -> int:
        if self.armed:
            self.armed = False
            raise RuntimeError("the clock failed")
        return time.time_ns() // 1000


@pytest.fixture
def fresh(pg_schemas: SchemaMaker) -> Iterator[str]:
    schema, url = pg_schemas.new()
    yield url
    pg_schemas.drop(schema)


def _session_states(url: str, pids: list[int]) -> list[str]:
    with psycopg.connect(url.split("?")[0], autocommit=True) as c:
        rows = c.execute("SELECT state FROM pg_stat_activity WHERE pid = ANY(%s)",
                         (pids,)).fetchall()
    return [r[0] for r in rows]


@contextmanager
def _failed_change(url: str, root: Path) -> Iterator[tuple[Any, Any, Any]]:
    """A store whose second write fails holding the agent (its clock raises
    once the lock is taken): (the gene's memory, the pool, the connection the
    first write left idle)."""
    clock = Failing()
    with MemoryStore.open(root / "rot", url=url, clock=clock) as store:
        store.create_agent("agent")
        mem = store.for_gene("agent", A, "d")
        mem.write_memory("k", b"one", "PATTERN")
        pool = store.backend.connections  # type: ignore[attr-defined]
        (conn, _), = pool._idle
        clock.armed = True
        with pytest.raises(RuntimeError, match="the clock failed"):
            mem.write_memory("k", b"two", "PATTERN")
        assert mem.read_memory("k").value == b"one"
        yield mem, pool, conn


def test_a_change_that_fails_is_rolled_back_and_its_connection_kept(
        fresh: str, tmp_path: Path) -> None:
    with _failed_change(fresh, tmp_path) as (mem, pool, conn):
        # The same connection is back, idle, out of pipeline mode -- not closed.
        assert [c for c, _ in pool._idle] == [conn] and not conn.closed
        assert conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
        assert _session_states(fresh, [conn.pgconn.backend_pid]) == ["idle"]
        # Its lock is gone: another session takes the agent's row at once.
        with psycopg.connect(fresh) as other:
            other.execute("SET lock_timeout = '2s'")
            other.execute("SELECT 1 FROM memory_agents WHERE agent_id = 'agent' FOR UPDATE")
        mem.write_memory("k", b"three", "PATTERN")  # and the next change uses it
        assert [c for c, _ in pool._idle] == [conn]
        assert mem.read_memory("k").value == b"three"


def test_without_the_rollback_the_connection_is_not_reused(
        fresh: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above bites: a change left open (no ROLLBACK, no Sync) is in
    pipeline mode, so the pool closes its connection rather than hand it on."""
    monkeypatch.setattr(pg_transaction.PostgresTransaction, "rollback", lambda self: None)
    with _failed_change(fresh, tmp_path) as (_, pool, conn):
        assert conn.closed and conn not in [c for c, _ in pool._idle]


def test_nothing_of_a_change_shows_before_its_sync(fresh: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the change's first round trip and its commit another session
    sees the agent as it was, and waits for the agent's lock."""
    seen: list[Any] = []

    def look() -> None:
        with psycopg.connect(fresh, autocommit=True) as other:
            seen.append(other.execute(
                "SELECT next_seq, (SELECT count(*) FROM memory_entries WHERE key = 'new') "
                "FROM memory_agents WHERE agent_id = 'agent'").fetchone())
            other.execute("SET lock_timeout = '50ms'")
            try:
                other.execute("SELECT 1 FROM memory_agents WHERE agent_id = 'agent' "
                              "FOR UPDATE")
                seen.append("locked by nobody")
            except psycopg.errors.LockNotAvailable:
                seen.append("locked")

    real_commit = pg_transaction.PostgresTransaction.commit

    def commit(self: pg_transaction.PostgresTransaction) -> None:
        t = threading.Thread(target=look)
        t.start()
        t.join()
        real_commit(self)

    with MemoryStore.open(tmp_path / "rot", url=fresh) as store:
        store.create_agent("agent")
        mem = store.for_gene("agent", A, "d")
        mem.write_memory("k", b"v", "PATTERN")
        with psycopg.connect(fresh, autocommit=True) as c:
            row = c.execute("SELECT next_seq FROM memory_agents").fetchone()
            assert row is not None
            before = row[0]
        monkeypatch.setattr(pg_transaction.PostgresTransaction, "commit", commit)
        mem.write_memory("new", b"v", "PATTERN")
        assert seen == [(before, 0), "locked"]
        assert mem.read_memory("new").value == b"v"


def test_the_lookup_runs_at_read_committed_whatever_the_default(
        pg_url: str, fresh: str, tmp_path: Path) -> None:
    """A URL whose sessions default to SERIALIZABLE (libpq's ``options``):
    each of the store's connections sets READ COMMITTED for itself, since a
    change begun without BEGIN runs at the session's default."""
    schema = parse_qs(urlsplit(fresh).query)["options"][0].split("=")[1]
    options = f"-c search_path={schema} -c default_transaction_isolation=serializable"
    url = f"{pg_url}{'&' if '?' in pg_url else '?'}options={quote(options, safe='')}"
    with psycopg.connect(url) as c:
        assert c.execute("SHOW default_transaction_isolation").fetchone() == (
            "serializable",)  # the default the URL asks for, without the store
    with MemoryStore.open(tmp_path / "rot", url=url) as store:
        store.create_agent("agent")
        store.for_gene("agent", A, "d").write_memory("k", b"v", "PATTERN")
        pool = store.backend.connections  # type: ignore[attr-defined]
        (conn, _), = pool._idle
        assert conn.execute("SHOW default_transaction_isolation").fetchone() == (
            "read committed",)
    with psycopg.connect(fresh) as c:  # in the schema the URL named
        assert c.execute("SELECT key FROM memory_entries").fetchall() == [("k",)]


def test_a_failed_change_says_why(fresh: str, tmp_path: Path) -> None:
    """A change whose statement fails on the server (here: a quota the
    counters' CHECK refuses, forced past the store's own check) is an error
    with the server's reason, and the next change works."""
    with MemoryStore.open(tmp_path / "rot", url=fresh) as store:
        store.create_agent("agent", quota_bytes=1000)
        mem = store.for_gene("agent", A, "d")
        mem.write_memory("k", b"v", "PATTERN")
        with psycopg.connect(fresh, autocommit=True) as c:
            c.execute("ALTER TABLE memory_entries ADD CONSTRAINT no_x CHECK (key <> 'x')")
        with pytest.raises(AgentMemoryError, match="no_x"):
            mem.write_memory("x", b"v", "PATTERN")
        mem.write_memory("k", b"w", "PATTERN")
        assert mem.read_memory("k").value == b"w"
        assert [e.key for e in mem.query_memory({})] == ["k"]


@pytest.mark.parametrize("sync", [True, False])
def test_a_session_the_server_ends_is_closed_and_retryable(fresh: str, sync: bool) -> None:
    """A FATAL error (the server ends the session: here it terminates itself,
    as ``pg_terminate_backend`` from another session does) leaves a closed
    connection, so the begin of a change is retried on another.  Ending the
    round trip with a ``Flush`` must not answer before the connection's end
    is seen: a change then failed where it retried before (seen once in a
    full run of test_connections_dropped_by_the_server_are_replaced)."""
    conn = psycopg.connect(fresh, autocommit=True)
    with pytest.raises(psycopg.OperationalError,
                       match=r"terminating connection|closed the connection") as caught:
        pipelined(conn, [("SELECT pg_terminate_backend(pg_backend_pid())", None),
                         ("SELECT 1", None)], sync=sync)
    assert retryable(caught.value, conn) and (conn.closed or conn.broken)
    conn.close()
