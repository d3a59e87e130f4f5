"""A key prefix that holds at most a page of keys is answered by one statement
on the key index, whatever the age of its entries (issue 33, target 4).

Checked on the plan SQLite chooses (``EXPLAIN QUERY PLAN``) and by counting
the virtual machine's steps (``set_progress_handler``), never with timings: the
range is scanned on the key index (filters given or not), nothing is sorted in
SQL (Python puts the rows newest first), and a range larger than the page
costs its count of a page and one keys whatever its size, then the race of
``test_query_plans.py`` runs.  The answers, with every filter, are the
newest-first reference on both backends.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import ManualClock, MemoryStore
from rotifer.memory.model import Category
from rotifer.memory.storage.sqlite.backend import SqliteBackend
from rotifer.memory.storage.sqlite.transaction import _whole_range_sql

from .conftest import StoreFactory
from .helpers import gene_id

GENE = gene_id("planner")
CATEGORIES = (Category.CACHE, Category.PATTERN, Category.CONTEXT, Category.PREFERENCE)


def _fill(store: MemoryStore, clock: ManualClock, old: int, dense: int, recent: int) -> None:
    """``old`` entries under ``o/`` first, then ``dense`` under ``f/``, then
    ``recent`` under ``r/``, a second apart, categories in turn."""
    store.create_agent("agent", quota_bytes=10**9)
    memory = store.for_gene("agent", GENE, None)
    n = 0
    for prefix, count in (("o/", old), ("f/", dense), ("r/", recent)):
        for i in range(count):
            memory.write_memory(f"{prefix}{i:04d}", b"v" * 10, CATEGORIES[n % 4])
            clock.advance(micros=1_000_000)
            n += 1


def _newest(store: MemoryStore, prefix: str) -> list[str]:
    with store.backend.read() as tx:
        return [r.key for r in tx.iter_newest("agent") if r.key.startswith(prefix)]


@pytest.mark.parametrize("prefix", ["o/", "r/"])
def test_sqlite_a_small_range_is_one_statement_on_the_key_index(tmp_path: Path, prefix: str
                                                                ) -> None:
    clock = ManualClock("2026-03-01T12:00:00Z")
    store = MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / 'm.db'}",
                             clock=clock)
    _fill(store, clock, 30, 300, 30)
    backend = store.backend
    assert isinstance(backend, SqliteBackend)
    memory = store.for_gene("agent", GENE, None)
    statements: list[str] = []
    backend.conn.set_trace_callback(statements.append)
    try:
        found = memory.query_memory({"keyPrefix": prefix, "limit": 50})
    finally:
        backend.conn.set_trace_callback(None)
    assert [e.key for e in found] == _newest(store, prefix)
    reads = [s for s in statements if "FROM memory_entries" in s and "EXISTS" not in s]
    assert len(reads) == 1, reads  # no probe, no count of its own, no second page
    plan = [r[3] for r in backend.conn.execute("EXPLAIN QUERY PLAN " + reads[0])]
    _assert_key_range_scan(plan)
    store.close()


def _assert_key_range_scan(plan: list[str]) -> None:
    """The rows' scan is the key index over the range; the count (in LIMIT) is
    the same range on it alone; no other index, no full scan, no sort."""
    searches = [step for step in plan if step.startswith(("SEARCH", "SCAN memory_entries"))]
    assert sorted(searches) == [
        "SEARCH memory_entries USING COVERING INDEX sqlite_autoindex_memory_entries_1 "
        "(agent_id=? AND key>? AND key<?)",
        "SEARCH memory_entries USING INDEX sqlite_autoindex_memory_entries_1 "
        "(agent_id=? AND key>? AND key<?)"], plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


@pytest.mark.parametrize("shape", [(True, True, False, False), (True, False, True, True),
                                   (True, True, True, True), (False, True, True, False)])
def test_sqlite_filters_keep_the_key_index(tmp_path: Path, shape: tuple[bool, ...]) -> None:
    """A category or a time window does not move the scan to the category's or
    the recency index (their whole length): the key range stays the scan."""
    db = tmp_path / "m.db"
    MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{db}").close()
    conn = sqlite3.connect(db)
    sql = _whole_range_sql(*shape)
    params: list[Any] = ["agent", "q/"] + (["q0"] if shape[0] else [])
    params += ["CACHE"] * shape[1] + [1] * shape[2] + [2] * shape[3]
    params += [10, "agent", "q/"] + (["q0"] if shape[0] else []) + [11]
    plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
    conn.close()
    if shape[0]:
        _assert_key_range_scan(plan)
    else:  # no upper bound (a prefix ending in the last character): key>? alone
        assert not any("TEMP B-TREE" in step or "SCAN memory_entries" in step
                       or "recent" in step or "cleanup" in step for step in plan), plan


def test_sqlite_a_large_range_costs_its_count_of_a_page_whatever_its_size(
        tmp_path: Path) -> None:
    """LIMIT is evaluated before the scan: a range of 300 keys and one of 3,000
    cost the whole-range statement the same steps (it counts 11 keys and reads
    no row), and fewer than one of 10 keys, which it reads."""
    db = tmp_path / "m.db"
    MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{db}").close()
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO memory_agents (agent_id, quota_bytes, max_retention_days, "
                 "anonymization_supported, used_bytes, next_seq) VALUES ('agent', 1, NULL, 0, 0, 1)")
    for prefix, count in (("a/", 10), ("b/", 300), ("c/", 3000)):
        conn.executemany(
            "INSERT INTO memory_entries (agent_id, key, category, value, size, created_by, "
            "last_accessed_by, created_us, updated_us, read_scope, write_scope, share_policy, "
            "seq) VALUES ('agent', ?, 'CACHE', x'00', 3, 'g', 'g', ?, ?, 'ALL_GENES', "
            "'ALL_GENES', 'PRIVATE', ?)", [(f"{prefix}{i:05d}", i, i, i) for i in range(count)])
    sql = _whole_range_sql(True, False, False, False)

    def steps(prefix: str) -> tuple[int, int]:
        counter = [0]

        def tick() -> int:
            counter[0] += 1
            return 0
        conn.set_progress_handler(tick, 1)
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        rows = conn.execute(sql, ("agent", prefix, upper, 10, "agent", prefix, upper, 11)
                            ).fetchall()
        conn.set_progress_handler(None, 0)
        return len(rows), counter[0]

    small, large, larger = steps("a/"), steps("b/"), steps("c/")
    conn.close()
    assert small[0] == 10 and large[0] == 0 and larger[0] == 0
    assert large[1] == larger[1] < small[1]


@pytest.mark.parametrize("query", [
    {"keyPrefix": "o/", "limit": 40}, {"keyPrefix": "r/", "limit": 30},
    {"keyPrefix": "o/0", "limit": 5}, {"keyPrefix": "o/", "category": "CACHE"},
    {"keyPrefix": "r/", "since": "2026-03-01T12:02:45Z"},
    {"keyPrefix": "o/", "until": "2026-03-01T12:00:20Z", "category": "PATTERN"},
    {"keyPrefix": "zz/"}, {"keyPrefix": "f/", "limit": 7},
])
def test_answers_are_the_newest_first_reference(store_factory: StoreFactory,
                                                query: dict[str, Any]) -> None:
    clock = ManualClock("2026-03-01T12:00:00Z")
    store = store_factory(clock=clock)
    _fill(store, clock, 30, 120, 30)
    memory = store.for_gene("agent", GENE, None)
    found = [e.key for e in memory.query_memory(query)]
    with store.backend.read() as tx:
        rows = list(tx.iter_newest("agent"))
    since = query.get("since")
    until = query.get("until")
    expected = [r.key for r in rows if r.key.startswith(query["keyPrefix"])
                and ("category" not in query or r.category.value == query["category"])
                and (since is None or r.updated_us >= _us(since))
                and (until is None or r.updated_us < _us(until))]
    assert found == expected[:query.get("limit", 100)]
    assert found or query["keyPrefix"] == "zz/"


def _us(text: str) -> int:
    from rotifer.memory.clock import parse_time

    return parse_time(text)


def test_a_small_range_puts_entries_of_one_time_in_write_order(store_factory: StoreFactory
                                                               ) -> None:
    """Entries sharing their update time (as an import may store them) come newest
    first by their number: the range's rows are sorted by seq, then (stable) by
    time, both descending."""
    from rotifer.memory.model import DEFAULT_ACCESS_POLICY
    from rotifer.memory.storage.backend import Row

    clock = ManualClock("2026-03-01T12:00:00Z")
    store = store_factory(clock=clock)
    store.create_agent("agent", quota_bytes=10**9)
    t0 = clock.now_us() - 10_000_000
    times = [t0 + 3, t0 + 1, t0 + 3, t0 + 2, t0 + 1, t0 + 3, t0 + 2]
    seqs = [7, 2, 9, 4, 5, 1, 6]
    with store.backend.write("agent") as tx:
        for i, (updated, seq) in enumerate(zip(times, seqs, strict=True)):
            tx.put(Row(agent_id="agent", key=f"t/{i}", category=Category.CACHE, value=b"v",
                       created_by=GENE, creator_domain=None, last_accessed_by=GENE,
                       created_us=updated, updated_us=updated, access=DEFAULT_ACCESS_POLICY,
                       retention=None, expires_us=None, seq=seq))
    found = [e.key for e in store.for_gene("agent", GENE, None).query_memory(
        {"keyPrefix": "t/"})]
    by_newest = sorted(range(7), key=lambda i: (times[i], seqs[i]), reverse=True)
    assert found == [f"t/{i}" for i in by_newest]
    assert found == _newest(store, "t/")
