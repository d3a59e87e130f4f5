"""PostgreSQL-only behaviour: how it is opened, how it fails, how it heals.

Every failure must surface as MEMORY_STORAGE_ERROR (memory never falls back to
another store), and messages must never show a password from the URL.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, ManualClock, MemoryStore
from rotifer.memory.model import DataPolicy
from rotifer.memory.storage.backend import AgentRecord
from rotifer.memory.storage.postgres import PostgresBackend, describe_url

from .conftest import SchemaMaker, with_search_path
from .helpers import gene_id

pytestmark = pytest.mark.postgres


def storage_error(fn: Callable[[], object]) -> AgentMemoryError:
    with pytest.raises(AgentMemoryError) as info:
        fn()
    assert info.value.code is ErrorCode.STORAGE_ERROR, info.value
    return info.value


def test_memory_url_selects_postgres(pg_fresh_url: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROTIFER_MEMORY_URL", pg_fresh_url)
    with MemoryStore.open(tmp_path / ".rotifer") as store:
        assert store.backend.name == "postgresql"
        store.create_agent("a")
        assert store.agents() == ["a"]
    # Nothing went to a local file: memory never falls back to SQLite.
    assert not (tmp_path / ".rotifer" / "playground.db").exists()


def test_an_unreachable_server_is_a_storage_error_without_the_password(tmp_path: Path) -> None:
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://someone:hunter2secret@127.0.0.1:{port}/db"
    err = storage_error(lambda: MemoryStore.open(tmp_path, url=url))
    assert "hunter2secret" not in str(err)
    assert f"127.0.0.1:{port}/db" in str(err)
    assert not (tmp_path / "playground.db").exists()


def test_a_malformed_url_is_a_storage_error() -> None:
    storage_error(lambda: PostgresBackend("postgresql://x/y?nosuchoption=1"))
    assert "password" not in describe_url("postgresql://u:password@h:1/d")


def test_a_database_that_is_not_utf8_is_refused(pg_url: str, admin: psycopg.Connection[
        tuple[object, ...]]) -> None:
    name = "ascii_" + uuid.uuid4().hex[:8]
    admin.execute(f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' "
                  "TEMPLATE template0")  # type: ignore[arg-type]
    url = pg_url.rsplit("/", 1)[0] + "/" + name
    err = storage_error(lambda: PostgresBackend(url))
    assert "UTF8" in str(err)


def test_a_newer_schema_version_is_refused(pg_fresh_url: str, pg_schemas: SchemaMaker) -> None:
    PostgresBackend(pg_fresh_url).close()
    with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
        conn.execute("UPDATE memory_meta SET value = '99' WHERE name = 'schema_version'")
    err = storage_error(lambda: PostgresBackend(pg_fresh_url))
    assert "schema version 99" in str(err)


def test_many_processes_opening_a_new_schema_at_once(pg_fresh_url: str) -> None:
    """Concurrent first opens must not collide creating the tables."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        assert pool.map(_open_and_close, [pg_fresh_url] * 8) == ["postgresql"] * 8


def _open_and_close(url: str) -> str:
    backend = PostgresBackend(url)
    backend.close()
    return backend.name


def test_the_database_refuses_to_commit_past_the_quota(pg_fresh_url: str) -> None:
    backend = PostgresBackend(pg_fresh_url)
    with backend.write("a") as tx:
        tx.insert_agent(AgentRecord("a", 100, DataPolicy(), 0, 1))
    storage_error(lambda: _update(backend, 101))
    with backend.peek() as tx:
        assert tx.get_agent("a") == AgentRecord("a", 100, DataPolicy(), 0, 1)


def _update(backend: PostgresBackend, used: int) -> None:
    with backend.write("a") as tx:
        tx.update_agent("a", used, 2, 0)


def test_a_busy_agent_times_out_as_a_storage_error(pg_fresh_url: str) -> None:
    holder = PostgresBackend(pg_fresh_url)
    waiter = PostgresBackend(pg_fresh_url, lock_timeout_ms=200)
    with holder.write("a") as tx:
        tx.insert_agent(AgentRecord("a", 100, DataPolicy(), 0, 1))
    for agent_id in ("a", "not-yet-created"):  # row lock, then advisory lock
        # A write transaction holds the agent from its first statement on.
        with holder.write(agent_id) as tx:
            tx.get_agent(agent_id)
            started = time.monotonic()
            err = storage_error(lambda agent_id=agent_id: _first_statement(waiter, agent_id))
            assert time.monotonic() - started < 10
            assert "lock" in str(err).lower()
    with waiter.write("a") as tx:  # and it is usable again afterwards
        assert tx.get_agent("a") is not None


def _first_statement(backend: PostgresBackend, agent_id: str) -> None:
    with backend.write(agent_id) as tx:
        tx.get_agent(agent_id)


def test_a_lock_timeout_in_the_url_wins(pg_fresh_url: str) -> None:
    url = pg_fresh_url + "%20-c%20lock_timeout%3D150"
    backend = PostgresBackend(url, lock_timeout_ms=999_999)
    with backend.peek() as tx:
        assert tx.conn.execute("SHOW lock_timeout").fetchone() == ("150ms",)


def test_creating_one_agent_twice_at_once(pg_fresh_url: str, tmp_path: Path) -> None:
    """The agent row does not exist yet, so the advisory lock must serialize creators."""
    stores = [MemoryStore.open(tmp_path, url=pg_fresh_url) for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    outcomes: list[str] = []

    def create(store: MemoryStore) -> None:
        barrier.wait()
        try:
            store.create_agent("new")
            outcomes.append("created")
        except AgentMemoryError as exc:
            outcomes.append(exc.code.value)

    threads = [threading.Thread(target=create, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == ["MEMORY_INVALID_INPUT"] * 5 + ["created"]


def _kill_sessions(admin: psycopg.Connection[tuple[object, ...]], app: str) -> int:
    rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE application_name = %s", (app,)).fetchall()
    return len(rows)


def test_connections_dropped_by_the_server_are_replaced(
        pg_fresh_url: str, tmp_path: Path, admin: psycopg.Connection[tuple[object, ...]]) -> None:
    app = "t" + uuid.uuid4().hex[:10]
    url = f"{pg_fresh_url}&application_name={app}"
    store = MemoryStore.open(tmp_path, url=url, clock=ManualClock())
    store.create_agent("a")
    mem = store.for_gene("a", gene_id("g"), "d")
    mem.write_memory("d/k", b"1", "PREFERENCE")
    assert isinstance(store.backend, PostgresBackend)

    # A write begins with BEGIN, which notices the dead connection and retries.
    assert _kill_sessions(admin, app) >= 1
    mem.write_memory("d/k", b"2", "PREFERENCE")

    # A peek cannot retry its body, so it checks a connection that sat idle.
    assert _kill_sessions(admin, app) >= 1
    store.backend.ping_after_s = 0.0
    entry = mem.read_memory("d/k")
    assert entry is not None and entry.value == b"2"
    assert [e.key for e in mem.query_memory()] == ["d/k"]


def test_a_closed_store_refuses(pg_fresh_url: str, tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path, url=pg_fresh_url)
    store.create_agent("a")
    store.close()
    storage_error(lambda: store.has_agent("a"))
    storage_error(lambda: store.create_agent("b"))


def test_idle_connections_are_bounded(pg_fresh_url: str,
                                      admin: psycopg.Connection[tuple[object, ...]]) -> None:
    app = "t" + uuid.uuid4().hex[:10]
    backend = PostgresBackend(f"{pg_fresh_url}&application_name={app}", max_idle=2)
    with backend.write("a") as tx:
        tx.insert_agent(AgentRecord("a", 10**6, DataPolicy(), 0, 1))

    def work() -> None:
        for _ in range(20):
            with backend.read() as tx:
                tx.count("a")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    # A closed connection's server process exits a moment after the client lets go, so the
    # server may still list it briefly: wait (bounded) for the count to settle.
    deadline = time.monotonic() + 15
    while True:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                            (app,)).fetchone()
        assert row is not None
        count = int(str(row[0]))
        if count <= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert count <= 2
    backend.close()


def test_a_forked_child_never_uses_the_parents_connections(pg_fresh_url: str) -> None:
    backend = PostgresBackend(pg_fresh_url)
    with backend.write("a") as tx:
        tx.insert_agent(AgentRecord("a", 10**6, DataPolicy(), 0, 1))
    ctx = mp.get_context("fork")
    child = ctx.Process(target=_child_writes, args=(backend,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    # The parent's pooled connection is still its own and still works.
    with backend.write("a") as tx:
        record = tx.get_agent("a")
        assert record is not None and record.next_seq == 7
        tx.update_agent("a", 0, 8, 0)


def _child_writes(backend: PostgresBackend) -> None:
    with backend.write("a") as tx:
        tx.update_agent("a", 0, 7, 0)
    backend.close()
    os._exit(0)


def test_search_path_url_helper_keeps_other_options() -> None:
    url = with_search_path("postgresql://u@h/d?sslmode=disable", "s1")
    assert url == "postgresql://u@h/d?sslmode=disable&options=-c%20search_path%3Ds1"
