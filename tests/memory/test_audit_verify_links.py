"""``audit verify`` of one agent on both backends: its own lines, and the link
into each of them.

On PostgreSQL the store keeps its own copy of the committed lines
(``memory_audit``), which verify replays; the local log's lines of the agent
are found by the history index and checked by digest there too, so a verify
of one agent costs that agent's lines on both backends.  Each of the agent's
lines must also name the line before it in the log (its ``prev``): a forged
line of another agent just before one of the agent's is caught, and the same
forgery passes with that check switched off (so the test bites).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rotifer.memory import ManualClock, MemoryStore
from rotifer.memory.audit import MAX_BYTES_ENV, archives
from rotifer.memory.audit.read import Scan
from rotifer.memory.audit.verify import verify_agent

from .conftest import StoreFactory
from .helpers import crowded, gene_id, rows_of

OWN = "found by the history index"
WHOLE = "hash chain intact over"


def verify_reading(store: MemoryStore, agent: str, **kw: Any) -> tuple[str, bool, Scan]:
    """(message, ok, what the verify's progress last said it read)."""
    seen = [Scan()]
    report = verify_agent(store, agent, progress=lambda s: seen.append(s), **kw)
    return report.message, report.ok, seen[-1]


def sql(factory: StoreFactory, statement: str) -> list[tuple[Any, ...]]:
    """Run ``statement`` on the store's database (``?`` placeholders: none)."""
    url = factory.url()
    if url.startswith("sqlite:"):
        with sqlite3.connect(url[len("sqlite:"):]) as conn:
            return conn.execute(statement).fetchall()
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement)
        return cursor.fetchall() if cursor.description else []


def test_verify_reads_the_agents_own_lines(store_factory: StoreFactory,
                                           tmp_path: Path) -> None:
    """A small agent among many lines of another: verify reads a's lines (and
    the line before each), not b's -- counted in lines, as its progress says."""
    store, log = crowded(store_factory, tmp_path)
    with store:
        size = log.stat().st_size
        total = len(log.read_bytes().splitlines())
        own = rows_of(log, "a")
        message, ok, read = verify_reading(store, "a")
        assert ok and OWN in message, message
        assert "links to the line before it" in message, message
        # a's 12 lines, the line before each, and the few after its last one
        assert len(own) <= read.lines <= 2 * len(own) + 20 < total // 5, (read, len(own))
        assert read.done < size // 5, (read, size)
        message, ok, read = verify_reading(store, "a", full=True)
        assert ok and WHOLE in message and read.done == size and read.lines == total, message


def forge_actor(rows: list[bytes], n: int) -> None:
    """A same-length edit of line ``n`` (its actor), places of all lines kept."""
    line = json.loads(rows[n])
    forged = rows[n].replace(line["actor"].encode(), gene_id("gx").encode())
    assert len(forged) == len(rows[n]) and forged != rows[n]
    rows[n] = forged


def rechain(rows: list[bytes], n: int) -> None:
    """Make line ``n + 1`` name line ``n``'s hash as it now is."""
    after = json.loads(rows[n + 1])
    after["prev"] = hashlib.sha256(rows[n]).hexdigest()
    rows[n + 1] = json.dumps(after, separators=(",", ":"), ensure_ascii=False).encode()


def test_a_forged_line_of_the_agent_with_its_neighbour_rechained_is_caught(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    store, log = crowded(store_factory, tmp_path)
    with store:
        assert verify_agent(store, "a").ok
        rows = log.read_bytes().splitlines()
        n = rows_of(log, "a")[5]
        assert json.loads(rows[n + 1])["agent"] == "b"
        forge_actor(rows, n)
        rechain(rows, n)  # the break moves on to a line of b's, which a's verify never reads
        log.write_bytes(b"".join(r + b"\n" for r in rows))
        message, ok, _ = verify_reading(store, "a", repair=False)
        assert not ok, message
        assert f"audit.jsonl line {n + 3}: broken hash chain" in message, message


def remove_before(rows: list[bytes], n: int) -> None:
    """Remove line ``n - 2`` and fill its place with line ``n - 1`` made longer
    (a field of padding) and linked to line ``n - 3``: every later line stays
    at its place and the chain holds up to line ``n``, which still names the
    line that was there before."""
    target = len(rows[n - 2]) + 1 + len(rows[n - 1])
    line = json.loads(rows[n - 1])
    line.pop("prev")
    line["pad"] = ""
    line["prev"] = hashlib.sha256(rows[n - 3]).hexdigest()
    size = len(json.dumps(line, separators=(",", ":")).encode())
    line["pad"] = "x" * (target - size)
    rows[n - 1] = json.dumps(line, separators=(",", ":")).encode()
    assert len(rows[n - 1]) == target
    del rows[n - 2]


@pytest.mark.parametrize("attack", ["edited", "removed"])
@pytest.mark.parametrize("links", [True, False])
def test_a_forged_or_removed_neighbour_before_the_agents_line_is_caught(
        store_factory: StoreFactory, tmp_path: Path, links: bool, attack: str) -> None:
    """A line of b just before one of a's, edited in place, or the line before
    that removed (its bytes taken by a longer neighbour, so every place the
    index names still holds its line); a's line is left as it was, so its own
    digest still matches.  The link into a's line no longer holds; with that
    check off, a's own lines alone pass."""
    store, log = crowded(store_factory, tmp_path)
    with store:
        rows = log.read_bytes().splitlines()
        n = rows_of(log, "a")[5]
        assert all(json.loads(rows[n - k])["agent"] == "b" for k in (1, 2, 3))
        if attack == "edited":
            forge_actor(rows, n - 1)
        else:
            remove_before(rows, n)
            n -= 1
        log.write_bytes(b"".join(r + b"\n" for r in rows))
        report = verify_agent(store, "a", repair=False, links=links)
        if links:
            assert not report.ok, report.message
            assert f"audit.jsonl line {n + 1}: broken hash chain" in report.message
        else:
            assert report.ok and OWN in report.message, report.message
        assert not verify_agent(store, "a", repair=False, full=True).ok


def test_the_first_line_after_a_rollover_links_to_the_archive(
        store_factory: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The line before an agent's first line in a file is the last line of the
    file before it: read there, and an edit of it caught."""
    monkeypatch.setenv(MAX_BYTES_ENV, "4096")
    store, log = crowded(store_factory, tmp_path, others=60)
    with store:
        a = store.for_gene("a", gene_id("ga"), "d")
        b = store.for_gene("b", gene_id("gb"), "d")
        # b's lines until a line of a's with a long key no longer fits the file
        # (a line that does not fit starts the next one) though b's still would.
        long_key = "d/" + "x" * 600
        for i in range(40):
            if log.stat().st_size + 600 > 4096:
                a.write_memory(long_key, b"s", "PATTERN")
                break
            b.write_memory(f"d/r{i % 7}", b"r" * 30, "CONTEXT")
        archive = archives(log)[-1]
        assert json.loads(log.read_bytes().splitlines()[0])["agent"] == "a"
        rows = archive.read_bytes().splitlines()
        assert json.loads(rows[-1])["agent"] == "b"
        message, ok, _ = verify_reading(store, "a")
        assert ok and OWN in message, message
        forge_actor(rows, len(rows) - 1)
        archive.write_bytes(b"".join(r + b"\n" for r in rows))
        report = verify_agent(store, "a", repair=False)
        assert not report.ok and "audit.jsonl line 1: broken hash chain" in report.message, \
            report.message


def test_a_missing_or_stale_index_is_rebuilt(store_factory: StoreFactory,
                                             tmp_path: Path) -> None:
    store, log = crowded(store_factory, tmp_path, others=120)
    query = "SELECT * FROM memory_audit_index WHERE agent_id = 'a' ORDER BY file_no, off"
    zero = "zeroblob(32)" if store_factory.backend == "sqlite" else "'\\x00'::bytea"
    with store:
        built = sql(store_factory, query)
        assert built
        for damage in ("DELETE FROM memory_audit_index WHERE agent_id = 'a'",
                       "UPDATE memory_audit_index SET off = off + 1 WHERE agent_id = 'a'",
                       f"UPDATE memory_audit_index SET digest = {zero} WHERE agent_id = 'a'"):
            sql(store_factory, damage)
            message, ok, read = verify_reading(store, "a")
            assert ok and WHOLE in message and read.done == log.stat().st_size, (damage,
                                                                                 message)
            assert sql(store_factory, query) == built, damage
            message, ok, _ = verify_reading(store, "a")
            assert ok and OWN in message, (damage, message)


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_replays_its_own_copy(store_factory: StoreFactory, tmp_path: Path) -> None:
    """What verify replays on PostgreSQL is ``memory_audit``: a line of a's
    changed there (the local log untouched) makes it disagree with the store."""
    store, _ = crowded(store_factory, tmp_path, others=60)
    with store:
        assert verify_agent(store, "a").ok
        sql(store_factory, "UPDATE memory_audit SET line = regexp_replace(line, "
            "'\"bytes\":[0-9]+', '\"bytes\":999') WHERE agent_id = 'a'")
        message, ok, _ = verify_reading(store, "a", repair=False)
        assert not ok, message


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_with_two_workers_checks_this_workers_lines(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    """Two workers, each with its own log, change one agent.  The index's rows
    name places in the log of the worker that wrote them (a row of the other
    worker's line where this log holds another line sends verify to this
    worker's whole log); every line of this worker's log is checked either
    way, and the replay is the database's, which holds both workers' changes."""
    clock = ManualClock("2026-03-01T12:00:00Z")
    one = store_factory(tmp_path / "w1" / ".rotifer", clock=clock)
    two = store_factory(tmp_path / "w2" / ".rotifer", clock=clock)
    one.create_agent("a")
    for n, store in enumerate((one, two, one, two, one)):
        clock.advance(seconds=1)
        store.for_gene("a", gene_id("ga"), "d").write_memory(f"d/k{n}", b"v" * (n + 1),
                                                              "PATTERN")
    report = verify_agent(one, "a")
    assert report.ok and "5 committed changes" in report.message, report.message
    report = verify_agent(two, "a")  # the last change is worker one's: not checked here
    assert report.ok and "anchor not checked here" in report.message, report.message
    log = tmp_path / "w1" / ".rotifer" / "audit.jsonl"
    rows = log.read_bytes().splitlines()
    forge_actor(rows, 1)  # worker one's first line of a's (after its create line)
    log.write_bytes(b"".join(r + b"\n" for r in rows))
    report = verify_agent(one, "a", repair=False)
    assert not report.ok, report.message


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_verify_of_an_agent_moved_in_from_sqlite(store_factory: StoreFactory,
                                                         tmp_path: Path) -> None:
    """An agent moved to PostgreSQL from SQLite: the part of its history that
    lived in SQLite is in the log alone (the database's copy starts at the
    move), so verify replays those lines from the log, found by the index --
    still only its own lines -- and the rest from the copy; an edit of a line
    from before the move is caught."""
    from rotifer.memory.transfer import move_agent

    clock = ManualClock("2026-03-01T12:00:00Z")
    rot = tmp_path / ".rotifer"
    first = MemoryStore.open(rot, url=f"sqlite:{tmp_path / 'first.db'}", clock=clock)
    with first:
        first.create_agent("a")
        first.create_agent("b")
        for i in range(30):
            clock.advance(seconds=1)
            first.for_gene("b", gene_id("gb"), "d").write_memory(f"d/b{i}", b"b", "CONTEXT")
            if i % 5 == 0:
                first.for_gene("a", gene_id("ga"), "d").write_memory(f"d/a{i}", b"a", "PATTERN")
        there = store_factory(rot, clock=clock)
        move_agent(first, there, "a")
        for i in range(20):
            clock.advance(seconds=1)
            first.for_gene("b", gene_id("gb"), "d").write_memory(f"d/c{i}", b"b", "CONTEXT")
            if i % 5 == 0:
                there.for_gene("a", gene_id("ga"), "d").write_memory(f"d/n{i}", b"n", "PATTERN")
        assert verify_agent(there, "a").ok  # after a move: the whole log, the index rebuilt
        message, ok, read = verify_reading(there, "a")
        assert ok and OWN in message and "database copy replayed" in message, message
        assert read.lines < len(rows_of(rot / "audit.jsonl", "a")) * 2 + 10, read
        log = rot / "audit.jsonl"
        rows = log.read_bytes().splitlines()
        n = rows_of(log, "a")[2]  # a write of a's in SQLite, before the move
        assert json.loads(rows[n])["action"] == "write" and json.loads(rows[n + 1])["agent"] == "b"
        forge_actor(rows, n)
        rechain(rows, n)
        log.write_bytes(b"".join(r + b"\n" for r in rows))
        message, ok, _ = verify_reading(there, "a", repair=False)
        assert not ok and "broken hash chain" in message, message
