"""The latency and round-trip suites run and make well-formed tables; the wire
relay counts what a real client sends.  No timing assertions."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from bench import latency, pgserver, report, roundtrips
from bench.__main__ import main
from bench.report import BEGIN, END, markers
from bench.timing import TINY
from bench.wire import Relay

from .test_harness import table_rows

TIME = r"[0-9.]+ (µs|ms|s)"


@pytest.fixture(scope="module")
def server() -> Iterator[pgserver.Server]:
    bindir = pgserver.find_bindir()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail(pgserver.MISSING + " (CI installs PostgreSQL)")
        pytest.skip(pgserver.MISSING)
    with pgserver.Server(bindir) as s:
        yield s


def test_latency_table_has_every_backend_and_process_count(tmp_path: Path) -> None:
    text = latency.run(tmp_path, TINY)
    rows = table_rows(text)
    assert rows[0][:2] == ["backend", "processes"] and len(rows[0]) == 3 + len(latency.CALLS)
    body = rows[2:]
    backends = ["SQLite"] + ([] if pgserver.find_bindir() is None else ["PostgreSQL"])
    assert [(r[0], int(r[1])) for r in body] == [(b, n) for b in backends for n in TINY.procs]
    for r in body:
        for cell in r[2:-1]:
            p50, p99 = cell.split(" / ")
            assert re.fullmatch(TIME, p50) and re.fullmatch(TIME, p99)
        assert float(r[-1].replace(",", "")) > 0
    assert f"{TINY.loops} timed loops per process" in text


def test_percentile_is_nearest_rank() -> None:
    ns = list(range(1, 101))
    assert latency.percentile(ns, 0.50) == 50e-9
    assert latency.percentile(ns, 0.99) == 99e-9
    assert latency.percentile([7], 0.99) == 7e-9


def test_relay_counts_round_trips_and_statements(server: pgserver.Server) -> None:
    relay = Relay(server.port)
    try:
        url = server.url("postgres").replace(f":{server.port}/", f":{relay.port}/")
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            before = relay.snapshot()
            for _ in range(3):
                conn.execute("SELECT %s::int", (1,))  # extended protocol: Parse..Sync
            conn.pgconn.exec_(b"SELECT 1; SELECT 2")  # one simple query: 1 round trip, 2 statements
            after = relay.snapshot()
    finally:
        relay.close()
    assert (after[0] - before[0], after[1] - before[1]) == (4, 5)
    assert relay.texts[-1] == "SELECT 1; SELECT 2"


def test_relay_counts_a_pipeline_as_one_round_trip(server: pgserver.Server) -> None:
    relay = Relay(server.port)
    try:
        url = server.url("postgres").replace(f":{server.port}/", f":{relay.port}/")
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            before = relay.snapshot()
            with conn.pipeline():
                for n in range(3):
                    conn.execute("SELECT %s::int", (n,))
            conn.execute("SELECT 4")
            after = relay.snapshot()
    finally:
        relay.close()
    assert (after[0] - before[0], after[1] - before[1]) == (2, 4)
    texts, trips = relay.texts[before[2]:], relay.trip_of[before[2]:]
    assert roundtrips.by_round_trip(texts, trips) == ("SELECT; SELECT; SELECT", "SELECT")


def test_statement_labels() -> None:
    assert roundtrips.label("SELECT 1 FROM memory_agents WHERE agent_id = $1 FOR UPDATE") \
        == "SELECT memory_agents FOR UPDATE"
    assert roundtrips.label("INSERT INTO memory_entries (a) VALUES ($1) ON CONFLICT (a) "
                            "DO UPDATE SET a = excluded.a") == "INSERT memory_entries"
    assert roundtrips.label("begin isolation level read committed; SET LOCAL lock_timeout = 5") \
        == "BEGIN; SET LOCAL lock_timeout"
    assert roundtrips.label("SELECT set_config('lock_timeout', '5', true)") \
        == "SELECT set_config"
    assert roundtrips.label("WITH w0 AS (INSERT INTO memory_entries (a) VALUES ($1) ON CONFLICT "
                            "(a) DO UPDATE SET a = excluded.a), w1 AS (DELETE FROM memory_audit "
                            "WHERE a = $2) UPDATE memory_agents SET b = $3") \
        == "WITH INSERT memory_entries, DELETE memory_audit, UPDATE memory_agents"


def test_roundtrips_table(tmp_path: Path, server: pgserver.Server) -> None:
    text = roundtrips.run(tmp_path, TINY)
    rows = table_rows(text)
    assert rows[0][0] == "call" and all(len(r) == len(rows[0]) for r in rows)
    body = {r[0]: r for r in rows[2:]}
    assert len(body) == 8
    trips = {}
    for name, r in body.items():
        for cell in r[1:3]:
            m = re.fullmatch(r"([0-9.]+) \(([0-9.]+)\)", cell)
            assert m, cell
            assert float(m[1]) >= 1 and float(m[2]) >= 1
        trips[name] = float(r[1].split()[0])
        assert re.fullmatch(TIME, r[3]) and re.fullmatch(TIME, r[4])
        assert "`" in r[6]
    pooled = {name: float(r[2].split()[0]) for name, r in body.items()}
    # Issue 16: BEGIN, the agent's lock and the lookup share one round trip; the
    # row change, counters and audit rows go out with COMMIT (the second); a
    # read that only notes its reader is a lookup and one conditional UPDATE; a
    # read that changes nothing and a delete of a missing key are one lookup; a
    # query answered by its first page is the expiry check and that one statement.
    assert trips == pooled == {
        "write_memory, new key": 2,
        "write_memory, update": 2,
        "read_memory, unchanged": 1,
        "read_memory, changes lastAccessedBy": 2,
        "query_memory, 100 entries": 2,
        "delete_memory": 3,
        "delete_memory, missing key": 1,
        "write_memory, evicts 1": 3,
    }
    # The lock and the lookup travel with BEGIN; the writes wait for COMMIT, and
    # go out as one statement (issue 33: they were four, psycopg's work is per
    # statement), as do a pooler's settings: a write is 6 statements behind a
    # pooler (it was 10), and connected directly 3 -- no BEGIN, no COMMIT: the
    # lock and lookup end with a Flush, the writes with the Sync that commits
    # (it was 8, then 5).
    assert body["write_memory, update"][6] == (
        "`BEGIN; SELECT set_config; "
        "SELECT memory_agents FOR UPDATE; SELECT memory_entries JOIN memory_agents`, "
        "`WITH INSERT memory_entries, INSERT memory_audit, INSERT memory_audit_index, "
        "UPDATE memory_agents; COMMIT`")
    for name in ("write_memory, new key", "write_memory, update"):
        assert (body[name][1], body[name][2]) == ("2 (3)", "2 (6)")


def test_named_blocks_leave_the_main_table_alone(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# B\n\n{BEGIN}\nmain table\n{END}\n\ntail\n")
    report.write_doc(doc, report.table_block("latency", "| a |\n|---|\n| 1 |\n", "tiny"),
                     "latency")
    report.write_doc(doc, report.table_block("latency", "| a |\n|---|\n| 2 |\n", "tiny"),
                     "latency")
    text = doc.read_text()
    begin, end = markers("latency")
    assert "main table" in text and text.count(begin) == 1 and text.count(end) == 1
    assert "| 2 |" in text and "| 1 |" not in text
    report.write_doc(doc, report.block([], "tiny"))
    text = doc.read_text()
    assert "main table" not in text and "| 2 |" in text


def test_main_runs_only_the_latency_suite(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# B\n\n{BEGIN}\nmain table\n{END}\n")
    assert main(["--tiny", "--only", "latency", "--out", str(doc)]) == 0
    text = doc.read_text()
    assert "main table" in text  # the ratio table's suites did not run
    begin, end = markers("latency")
    block = text[text.index(begin):text.index(end)]
    assert len(table_rows(block)) >= 2 + len(TINY.procs)
