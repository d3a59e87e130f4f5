"""A PostgreSQL write on the wire, and the pipeline that sends it (issue 33).

Counted by the benchmarks' relay (bench/wire.py), which reads every message
the client sends on its way to a real server: a write is two round trips of
3 statements -- no ``BEGIN``, no ``COMMIT`` -- (6 with
``rotifer_pooler=transaction``: ``BEGIN``, its ``set_config``, ``COMMIT``);
once warm, directly, no statement text travels (each is a prepared
statement of the store's own), and behind a pooler no statement is ever
prepared.  Then :func:`~rotifer.memory.storage.postgres.pipeline.pipelined`
itself on a real connection: errors, prepared statements, and the connection
usable after a failure.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from bench.wire import Relay
from rotifer.memory import MemoryStore
from rotifer.memory.storage.postgres.pipeline import pipelined

from .conftest import SchemaMaker, with_rotifer_schema
from .helpers import gene_id

pytestmark = pytest.mark.postgres

WARM, COUNTED = 8, 10


@pytest.fixture
def relayed(pg_url: str, pg_schemas: SchemaMaker) -> Iterator[tuple[Relay, str]]:
    """A relay in front of the session's server, and a URL through it (a schema of its own)."""
    port = urlsplit(pg_url).port
    assert port is not None
    relay = Relay(port)
    schema, _ = pg_schemas.new()
    try:
        yield relay, with_rotifer_schema(pg_url.replace(f":{port}/", f":{relay.port}/"), schema)
    finally:
        relay.close()
        pg_schemas.drop(schema)


def _count_writes(relay: Relay, url: str, rot: Path) -> tuple[int, int, list[str], list[str]]:
    """Round trips, statements, Parse names and texts of COUNTED updates, after WARM."""
    with MemoryStore.open(rot, url=url) as store:
        store.create_agent("agent")
        mem = store.for_gene("agent", gene_id("a"), "d")
        for i in range(WARM):
            mem.write_memory("k", bytes([i]) * 50, "PATTERN")
        trips0, stmts0, texts0 = relay.snapshot()
        names0 = len(relay.names)
        for i in range(COUNTED):
            mem.write_memory("k", bytes([i]) * 60, "PATTERN")
        trips, stmts, texts = relay.snapshot()
        names = relay.names[names0:]
        assert mem.read_memory("k").value == bytes([COUNTED - 1]) * 60
        return trips - trips0, stmts - stmts0, names, relay.texts[texts0:texts]


def test_a_write_is_two_round_trips_of_prepared_statements(
        relayed: tuple[Relay, str], tmp_path: Path) -> None:
    relay, url = relayed
    trips, statements, names, texts = _count_writes(relay, url, tmp_path)
    # The lock and lookup, then the folded writes: no BEGIN, no COMMIT (the
    # first round trip ends with a Flush, the second with the Sync that commits).
    assert (trips, statements) == (2 * COUNTED, 3 * COUNTED)
    assert (names, texts) == ([], []), texts  # every statement prepared: no SQL text travels
    assert any(n.startswith("_rotifer_") for n in relay.names)  # prepared by the store


def test_behind_a_pooler_nothing_is_prepared(relayed: tuple[Relay, str], tmp_path: Path
                                             ) -> None:
    relay, url = relayed
    trips, statements, names, texts = _count_writes(
        relay, url + "&rotifer_pooler=transaction", tmp_path)
    assert (trips, statements) == (2 * COUNTED, 6 * COUNTED)
    assert len(texts) == 6 * COUNTED and set(names) == {""}
    assert set(relay.names) == {""}  # not one named statement, warm-up included


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=5) as c:
        yield c


def _prepared(conn: psycopg.Connection[tuple[Any, ...]]) -> list[str]:
    rows = conn.execute("SELECT statement FROM pg_prepared_statements "
                        "WHERE name LIKE '\\_rotifer\\_%%'").fetchall()
    return [r[0] for r in rows]


def test_a_failed_statement_raises_its_error_and_leaves_the_connection_usable(
        conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    conn.execute("CREATE TEMP TABLE t (n int PRIMARY KEY)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        pipelined(conn, [("BEGIN", None), ("INSERT INTO t VALUES (%s)", (1,)),
                         ("INSERT INTO t VALUES (%s)", (1,)), ("INSERT INTO t VALUES (%s)", (2,)),
                         ("COMMIT", None)])
    assert conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    conn.execute("ROLLBACK")
    results = pipelined(conn, [("INSERT INTO t VALUES (%s), (%s)", (3, 4)),
                               ("SELECT n FROM t ORDER BY n", None)])
    assert results[0].rowcount == 2
    assert results[1].fetchall() == [(3,), (4,)]
    assert results[1].fetchone() is None


def test_a_statement_is_prepared_on_its_fifth_use_and_again_if_that_failed(
        conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    sql = "SELECT %s::bigint + 1"
    for n in range(4):
        assert pipelined(conn, [(sql, (n,))])[0].fetchone() == (n + 1,)
    assert _prepared(conn) == []
    # The fifth use would prepare it, but an earlier statement fails the round
    # trip: the server never made it, so the next use prepares it again.
    with pytest.raises(psycopg.errors.DivisionByZero):
        pipelined(conn, [("SELECT 1 / 0", None), (sql, (4,))])
    assert _prepared(conn) == []
    assert pipelined(conn, [(sql, (5,))])[0].fetchone() == (6,)
    assert _prepared(conn) == ["SELECT $1::bigint + 1"]
    assert pipelined(conn, [(sql, (6,)), (sql, (7,))])[1].fetchone() == (8,)


def test_without_a_prepare_threshold_nothing_is_prepared(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=None) as c:
        for n in range(10):
            assert pipelined(c, [("SELECT %s::int", (n,))])[0].fetchone() == (n,)
        assert _prepared(c) == []


def test_only_percent_s_placeholders(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    assert pipelined(conn, [("SELECT '100%%', %s::text", ("x",))])[0].fetchone() == ("100%", "x")
    with pytest.raises(ValueError, match="only %s placeholders"):
        pipelined(conn, [("SELECT %(a)s", None)])
    assert conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF


#: In a process of its own: a relay in that process (a thread that needs the
#: GIL to pass each piece on) and a result of 4 MB, which arrives in pieces.
_PIECES = textwrap.dedent("""
    import sys, psycopg
    from bench.wire import Relay
    from rotifer.memory.storage.postgres.pipeline import pipelined
    port = int(sys.argv[1])
    relay = Relay(port)
    url = sys.argv[2].replace(f":{port}/", f":{relay.port}/")
    with psycopg.connect(url, autocommit=True) as conn:
        rows = pipelined(conn, [("SELECT repeat('x', %s)", (4 << 20,)),
                                ("SELECT 1", None)])[0].fetchall()
    print(len(rows[0][0]))
""")


def test_a_result_that_arrives_in_pieces_is_waited_for_without_the_gil(pg_url: str) -> None:
    """Before: libpq was asked for a result it held only part of, and waited for
    the rest itself, holding the GIL -- so the relay's thread, which had to pass
    the rest on, never ran (the bench's query through its relay hung).  The
    same wait kept the watchdog's thread from cutting a frozen server off."""
    port = urlsplit(pg_url).port
    done = subprocess.run([sys.executable, "-c", _PIECES, str(port), pg_url],
                          capture_output=True, text=True, timeout=120, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(4 << 20)]


def test_a_connection_ended_under_a_round_trip_raises_and_is_closed(
        conn: psycopg.Connection[tuple[Any, ...]], pg_url: str) -> None:
    """The server ends the session while the round trip waits: an
    OperationalError (libpq's "server closed the connection", or the server's
    own AdminShutdown, as psycopg raises them), the connection closed, so the
    pool discards it and a transaction's BEGIN is retried on another."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert pid is not None

    def terminate() -> None:
        time.sleep(0.3)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid[0],))

    killer = threading.Thread(target=terminate)
    killer.start()
    try:
        with pytest.raises(psycopg.OperationalError):
            pipelined(conn, [("SELECT 1", None), ("SELECT pg_sleep(30)", None)])
    finally:
        killer.join()
    assert conn.closed and conn.broken


def test_answers_the_round_trip_did_not_ask_for_end_the_connection(
        conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    """More results than the round trip sent statements (a connection whose
    protocol state is confused -- seen behind pgbouncer while its server was
    killed and restarted) is a lost connection: closed and an
    ``OperationalError``, never an ``IndexError`` or someone else's rows."""
    conn.pgconn.enter_pipeline_mode()
    conn.pgconn.send_query_params(b"SELECT 'not asked for'", None)  # no Sync of its own
    with pytest.raises(psycopg.OperationalError, match="more answers"):
        pipelined(conn, [("SELECT %s::text", ("asked for",))])
    assert conn.closed
