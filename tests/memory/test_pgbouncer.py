"""PostgreSQL through a real pgbouncer, in transaction and in session mode.

In transaction mode consecutive transactions of one client run on different
server connections: named prepared statements, session settings and
``options=-c ...`` startup parameters do not survive (pgbouncer refuses the
last outright).  ``rotifer_pooler=transaction`` in the URL makes rotifer use
none of them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore
from rotifer.memory.storage.postgres import PostgresBackend

from .conftest import PgBouncer, SchemaMaker, with_rotifer_schema, with_search_path
from .helpers import gene_id

pytestmark = pytest.mark.postgres


@pytest.fixture
def schema(pg_schemas: SchemaMaker) -> Iterator[str]:
    name, _ = pg_schemas.new()
    yield name
    pg_schemas.drop(name)


def _work(store: MemoryStore, n: int, failures: list[BaseException]) -> None:
    try:
        mem = store.for_gene(f"agent{n % 3}", gene_id(f"g{n}"), "d")
        keys: set[str] = set()
        for i in range(40):
            key = f"d/{n}/{i % 7}"
            mem.write_memory(key, bytes([n]) * (10 + i), "PATTERN")
            keys.add(key)
            entry = mem.read_memory(key)
            assert entry is not None and entry.value == bytes([n]) * (10 + i)
            assert {e.key for e in mem.query_memory({"keyPrefix": f"d/{n}/"})} == keys
            if i % 5 == 4:
                mem.delete_memory(key)
                keys.discard(key)
    except BaseException as exc:
        failures.append(exc)


@pytest.mark.parametrize("mode", ["transaction", "session"])
def test_many_threads_through_pgbouncer(pgbouncer: PgBouncer, schema: str, tmp_path: Path,
                                        mode: str) -> None:
    """Before rotifer_pooler: 'prepared statement "_pg3_N" does not exist' and
    worse in transaction mode, as soon as a statement had run five times."""
    url = with_rotifer_schema(pgbouncer.url(mode), schema)
    stores = [MemoryStore.open(tmp_path / f"r{k}", url=url) for k in range(2)]
    for a in range(3):
        stores[0].create_agent(f"agent{a}")
    failures: list[BaseException] = []
    threads = [threading.Thread(target=_work, args=(stores[n % 2], n, failures))
               for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert not failures, failures[:3]
    for store in stores:
        store.close()


def test_settings_hold_per_transaction_whatever_the_server_session_has(
        pgbouncer: PgBouncer, schema: str) -> None:
    """A session-level SET by another client stays on pgbouncer's server connection;
    rotifer's own timeouts and search path are SET LOCAL in each transaction."""
    url = with_rotifer_schema(pgbouncer.url("transaction") + "&rotifer_timeout=7", schema)
    backend = PostgresBackend(url, lock_timeout_ms=1500)
    with psycopg.connect(pgbouncer.url_for("rotifer_tx"), autocommit=True) as other:
        other.execute("SET lock_timeout = 1")
        other.execute("SET search_path = pg_catalog")
    for _ in range(3):
        with backend.write("a") as tx:
            tx.get_agent("a")  # the transaction begins with its first statement
            assert tx.conn is not None
            got = tx.conn.execute("SELECT current_setting('lock_timeout'), "
                                  "current_setting('statement_timeout'), current_schema()"
                                  ).fetchone()
            assert got == ("1500ms", "7s", schema)
    backend.close()


def test_pgbouncer_refuses_options_and_rotifer_schema_replaces_it(
        pgbouncer: PgBouncer, schema: str, tmp_path: Path) -> None:
    with pytest.raises(AgentMemoryError) as info:
        MemoryStore.open(tmp_path, url=with_search_path(pgbouncer.url("transaction"), schema))
    assert info.value.code is ErrorCode.STORAGE_ERROR
    with MemoryStore.open(tmp_path, url=with_rotifer_schema(pgbouncer.url("transaction"),
                                                            schema)) as store:
        store.create_agent("a")
        assert store.agents() == ["a"]
    with MemoryStore.open(tmp_path, url=with_rotifer_schema(pgbouncer.url("session"),
                                                            schema)) as store:
        assert store.agents() == ["a"]
