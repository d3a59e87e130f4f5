"""What the PostgreSQL backend does to save round trips, and that it keeps the rules.

A change sends BEGIN, the agent's row lock and its lookup as one pipeline, and
its writes (entry, counters, audit rows) only with COMMIT, after the audit
file append (issue 16).  These tests race real workers on a real server
(directly and through a transaction-mode pgbouncer) to show the lookup is
never older than the lock, and break the deferred statements with real
constraints to show a failure among them is MEMORY_STORAGE_ERROR, settled with
a ``rolled_back`` line, with nothing written.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.engine.changes import Change
from rotifer.memory.model import UNSET, Category, MemoryEntry
from rotifer.memory.storage.backend import AgentRecord, Transaction
from rotifer.memory.storage.postgres.folding import folded
from rotifer.memory.storage.postgres.transaction import PUT_SQL

from .conftest import StoreFactory
from .helpers import audit_lines, gene_id

pytestmark = pytest.mark.postgres

A, B = gene_id("a"), gene_id("b")
AGENT = "agent"


@pytest.fixture(params=[pytest.param("postgres", id="postgres"),
                        pytest.param("pgbouncer", id="pgbouncer")])
def backend(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def _schema(store: MemoryStore) -> str:
    name: str = store.backend.schema
    return name


def _waiting_on_a_lock(admin: psycopg.Connection[tuple[Any, ...]], count: int = 1) -> None:
    """Until ``count`` rotifer sessions wait for a lock (they are then blocked
    behind the holder, with everything before the wait already done)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                            "'Lock' AND application_name = 'rotifer-memory'").fetchone()
        if row is not None and row[0] >= count:
            return
        time.sleep(0.02)
    raise AssertionError("the second worker never waited for the agent's lock")


def _holding_a_change(store: MemoryStore, key: str, value: bytes
                      ) -> tuple[threading.Thread, threading.Event, threading.Event, list[Any]]:
    """A worker in the middle of a change: it has written ``key`` (uncommitted)
    through the rules and holds the agent until released."""
    mem = store.for_gene(AGENT, A, "d")
    holding, release = threading.Event(), threading.Event()
    out: list[Any] = []

    def body(tx: Transaction, record: AgentRecord, change: Change) -> MemoryEntry | None:
        assert mem.actor is not None
        entry = mem._write_in(tx, record, change, mem.actor, key, value, Category.CONTEXT,
                              None, UNSET)
        tx.get_agent(AGENT)  # a statement of its own: the queued writes reach the server
        holding.set()
        release.wait(20)
        return entry

    def run() -> None:
        try:
            out.append(store.change(AGENT, A, body, key))
        except BaseException as exc:  # pragma: no cover - reported by the test
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert holding.wait(20)
    return thread, holding, release, out


def test_a_change_that_waited_for_the_lock_sees_what_the_holder_committed(
        store_factory: StoreFactory, tmp_path: Path,
        admin: psycopg.Connection[tuple[Any, ...]]) -> None:
    """Two workers race on one agent and key.  The second one's lookup travels
    with its lock request; had it read the entry or the counters from before
    the wait, its update would name the wrong previous size, reuse the first
    one's change number and miscount the agent's bytes."""
    rot = tmp_path / ".rotifer"
    first, second = store_factory(rot), store_factory(rot)
    first.create_agent(AGENT, 10_000)
    first.for_gene(AGENT, A, "d").write_memory("k", b"small", "CONTEXT")  # 6 bytes, seq 1
    thread, _, release, out = _holding_a_change(first, "k", b"x" * 50)  # 51 bytes, seq 2
    result: list[Any] = []
    racer = threading.Thread(target=lambda: result.append(
        second.for_gene(AGENT, B, "d").write_memory("k", b"y" * 10, "CONTEXT")))
    racer.start()
    _waiting_on_a_lock(admin)
    release.set()
    thread.join(20)
    racer.join(20)
    assert isinstance(out[0], MemoryEntry) and isinstance(result[0], MemoryEntry)
    writes = [line for line in audit_lines(rot) if line["key"] == "k"]
    assert [(w["action"], w["seq"], w["bytes"], w.get("previousBytes")) for w in writes] == [
        ("write", 1, 6, None), ("update", 2, 51, 6), ("update", 3, 11, 51)]
    record = first.agent_record(AGENT)
    assert (record.used_bytes, record.next_seq) == (11, 4)
    with first.backend.peek() as tx:
        assert tx.sum_sizes(AGENT) == 11
    assert verify_agent(first, AGENT).ok


def test_a_read_that_notes_its_reader_never_overwrites_a_newer_entry(
        store_factory: StoreFactory, tmp_path: Path,
        admin: psycopg.Connection[tuple[Any, ...]]) -> None:
    """The reader's lookup sees the old entry; its one-statement note of
    lastAccessedBy waits for the change holding the agent, finds the entry
    rewritten, applies to nothing, and the read goes the full way: it returns
    the new entry, not the one it first looked up."""
    rot = tmp_path / ".rotifer"
    first, second = store_factory(rot), store_factory(rot)
    first.create_agent(AGENT, 10_000)
    first.for_gene(AGENT, A, "d").write_memory("k", b"old", "CONTEXT")
    thread, _, release, _ = _holding_a_change(first, "k", b"new")
    got: list[MemoryEntry | None] = []
    reader = threading.Thread(target=lambda: got.append(
        second.for_gene(AGENT, B, "d").read_memory("k")))
    reader.start()
    _waiting_on_a_lock(admin)
    release.set()
    thread.join(20)
    reader.join(20)
    entry = got[0]
    assert entry is not None and entry.value == b"new" and entry.last_accessed_by == B
    stored = first.for_gene(AGENT, B, "d").read_memory("k")
    assert stored is not None and stored.last_accessed_by == B
    assert first.agent_record(AGENT).next_seq == 3  # the read took no number


BREAKS: dict[str, tuple[str, str]] = {
    # which deferred statement fails: (table, a constraint only the second write breaks)
    "entry": ("memory_entries", "CHECK (key <> 'boom')"),
    "counters": ("memory_agents", "CHECK (next_seq < 3)"),
    "audit": ("memory_audit", "CHECK (line NOT LIKE '%boom%')"),
}


@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_a_deferred_write_that_fails_fails_the_change_and_is_rolled_back(
        store_factory: StoreFactory, tmp_path: Path, broken: str,
        admin: psycopg.Connection[tuple[Any, ...]]) -> None:
    """The entry, the counters and the audit rows go out with COMMIT, after the
    audit file append.  Any of them failing: MEMORY_STORAGE_ERROR, a
    rolled_back line for the change, and nothing of it in the database."""
    rot = tmp_path / ".rotifer"
    store = store_factory(rot)
    store.create_agent(AGENT, 10_000)
    mem = store.for_gene(AGENT, A, "d")
    mem.write_memory("ok", b"1", "CONTEXT")  # change 1
    table, check = BREAKS[broken]
    schema = _schema(store)
    admin.execute(f'ALTER TABLE "{schema}".{table} ADD CONSTRAINT broken {check}')  # type: ignore[arg-type]
    before = store.agent_record(AGENT)
    with pytest.raises(AgentMemoryError) as info:
        mem.write_memory("boom", b"22", "CONTEXT")  # change 2
    assert info.value.code is ErrorCode.STORAGE_ERROR
    assert "broken" in str(info.value)  # the server's own reason
    lines = audit_lines(rot)
    assert [(line["action"], line["seq"]) for line in lines[-2:]] == [
        ("write", 2), ("rolled_back", 2)]
    assert store.agent_record(AGENT) == before
    assert mem.read_memory("boom") is None
    assert [e.key for e in mem.query_memory()] == ["ok"]
    rows = admin.execute(f'SELECT seq FROM "{schema}".memory_audit ORDER BY id'  # type: ignore[arg-type]
                         ).fetchall()
    assert rows == [(1,)]
    admin.execute(f'ALTER TABLE "{schema}".{table} DROP CONSTRAINT broken')  # type: ignore[arg-type]
    assert verify_agent(store, AGENT).ok
    mem.write_memory("after", b"3", "CONTEXT")  # the number is free again: change 2
    assert audit_lines(rot)[-1]["seq"] == 2
    assert verify_agent(store, AGENT).ok


def test_a_failure_while_the_writes_wait_surfaces_at_the_next_read(
        store_factory: StoreFactory, tmp_path: Path,
        admin: psycopg.Connection[tuple[Any, ...]]) -> None:
    """A queued write goes out with the next statement that needs an answer;
    its failure ends the transaction there, before anything commits."""
    store = store_factory(tmp_path / ".rotifer")
    store.create_agent(AGENT, 10_000)
    schema = _schema(store)
    admin.execute(f'ALTER TABLE "{schema}".memory_entries '  # type: ignore[arg-type]
                  "ADD CONSTRAINT broken CHECK (key <> 'boom')")
    seen: list[str] = []

    def body(tx: Transaction, record: AgentRecord, change: Change) -> None:
        tx.touch(AGENT, "nothing", A)  # queued, harmless
        tx.delete(AGENT, ["nothing"])  # queued, harmless
        tx.get_agent(AGENT)  # sends them: fine
        seen.append("flushed")
        tx.put(_row("boom"))  # queued, breaks the constraint
        tx.get_agent(AGENT)  # sends it: fails here
        seen.append("not reached")

    with pytest.raises(AgentMemoryError) as info:
        store.change(AGENT, A, body)
    assert info.value.code is ErrorCode.STORAGE_ERROR and "broken" in str(info.value)
    assert seen == ["flushed"]
    with store.backend.peek() as tx:
        assert tx.get(AGENT, "boom") is None
        assert tx.count(AGENT) == 0


def _row(key: str) -> Any:
    from rotifer.memory.model import DEFAULT_ACCESS_POLICY
    from rotifer.memory.storage.backend import Row

    return Row(agent_id=AGENT, key=key, category=Category.CACHE, value=b"v", created_by=A,
               creator_domain="d", last_accessed_by=A, created_us=1, updated_us=1,
               access=DEFAULT_ACCESS_POLICY, retention=None, expires_us=None, seq=1)


def test_an_unused_transaction_takes_no_connection(store_factory: StoreFactory) -> None:
    """A transaction begins with its first statement: an empty one costs nothing."""
    store = store_factory()
    pool = store.backend.connections  # type: ignore[attr-defined]
    busy: Callable[[], int] = lambda: pool._open_count - len(pool._idle)  # noqa: E731
    with store.backend.write(AGENT):
        assert busy() == 0
    with store.backend.read():
        assert busy() == 0


def test_queued_writes_to_distinct_tables_are_one_statement() -> None:
    """A change's upsert, audit row, index row and counters go out as one
    ``WITH`` statement; a second write to a table already in it starts the
    next statement (one ``WITH`` would run both on one snapshot)."""
    put = (PUT_SQL, (1,))
    line = ("INSERT INTO memory_audit (agent_id, seq, line) VALUES (%s, %s, %s)", (2, 3, 4))
    counters = ("UPDATE memory_agents SET next_seq = %s WHERE agent_id = %s", (5, 6))
    gone = ("DELETE FROM memory_entries WHERE agent_id = %s AND key = ANY(%s)", (7, 8))
    one = folded([put, line, counters])
    assert len(one) == 1 and one[0][0].startswith("WITH w0 AS (INSERT INTO memory_entries")
    assert one[0][1] == (1, 2, 3, 4, 5, 6)
    assert [s[1] for s in folded([gone, put, line])] == [(7, 8), (1, 2, 3, 4)]
    assert folded([put]) == [put]
    assert folded([]) == []


def test_writes_to_one_key_in_one_change_apply_in_order(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    """Queued writes that touch one table twice (delete a key, write it again,
    delete and write again) apply in the order they were made."""
    store = store_factory(tmp_path / ".rotifer")
    store.create_agent(AGENT, 10_000)
    first, second = _row("k"), _row("k")._replace(value=b"second", seq=2)

    def body(tx: Transaction, record: AgentRecord, change: Change) -> None:
        tx.put(first)
        tx.delete(AGENT, ["k"])
        tx.put(second)
        tx.touch(AGENT, "k", B)

    store.change(AGENT, A, body)
    with store.backend.peek() as tx:
        row = tx.get(AGENT, "k")
    assert row is not None and (row.value, row.seq, row.last_accessed_by) == (b"second", 2, B)


def test_an_agent_and_its_entries_are_dropped_in_one_statement(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    """Dropping an agent deletes its entries and its row in one ``WITH``: the
    foreign key from the entries is checked at the statement's end."""
    store = store_factory(tmp_path / ".rotifer")
    store.create_agent(AGENT, 10_000)
    mem = store.for_gene(AGENT, A, "d")
    for i in range(3):
        mem.write_memory(f"k{i}", b"v", "CONTEXT")
    store.change(AGENT, A, lambda tx, record, change: tx.delete_agent(AGENT))
    with store.backend.peek() as tx:
        assert tx.get_agent(AGENT) is None and tx.count(AGENT) == 0
