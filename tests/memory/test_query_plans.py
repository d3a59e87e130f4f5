"""A query, a read and a write cost what their answer costs, not what the agent holds.

Checked on the plans the databases choose (``EXPLAIN``), never with timings:
the first page of a query is sized by its ``limit`` and walked in recency order
on an index (no sort of every matching row), a read is three index searches,
and a key-prefix query takes the plan that fits the prefix (SQLite has no
statistics for that, so the store probes the newest entries first; PostgreSQL's
planner decides from its statistics).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rotifer.memory import MemoryStore
from rotifer.memory.model import DEFAULT_ACCESS_POLICY, Category, DataPolicy
from rotifer.memory.storage.backend import AgentRecord, Row
from rotifer.memory.storage.sql_text import lookup_sql, newest_sql
from rotifer.memory.storage.sqlite.backend import SqliteBackend

from .conftest import StoreFactory
from .helpers import gene_id

GENE = gene_id("planner")
CATEGORIES = (Category.CACHE, Category.PATTERN, Category.CONTEXT, Category.PREFERENCE)


def _fill(store: MemoryStore, dense: int, sparse: int, tail: int = 3) -> None:
    """``dense`` entries under ``f/`` written first, then ``sparse`` under ``q/``
    interleaved with ``f/`` ones, then ``tail`` more ``f/``: ``f/`` is most of the
    newest entries, ``q/`` a few scattered among them."""
    store.create_agent("agent", quota_bytes=10**9)
    memory = store.for_gene("agent", GENE, None)
    for i in range(dense):
        memory.write_memory(f"f/{i}", b"v" * 20, CATEGORIES[i % 4])
    for i in range(sparse):
        memory.write_memory(f"q/{i}", b"q", Category.CACHE)
        memory.write_memory(f"f/x{i}", b"w", CATEGORIES[i % 4])
    for i in range(tail):
        memory.write_memory(f"f/y{i}", b"y", Category.CONTEXT)


class _Traced:
    """The SELECTs on memory_entries an SQLite store runs, with their plans."""

    def __init__(self, store: MemoryStore) -> None:
        backend = store.backend
        assert isinstance(backend, SqliteBackend)
        self.conn = backend.conn
        self.statements: list[str] = []

    def __enter__(self) -> _Traced:
        self.conn.set_trace_callback(self.statements.append)
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.set_trace_callback(None)

    def pages(self) -> list[str]:
        return [s for s in self.statements
                if s.startswith("SELECT") and "FROM memory_entries" in s
                and "ORDER BY updated_us DESC" in s]

    def plan(self, statement: str) -> list[str]:
        return [r[3] for r in self.conn.execute("EXPLAIN QUERY PLAN " + statement)]


def _newest(store: MemoryStore, prefix: str | None = None, category: Category | None = None
            ) -> list[str]:
    """The reference: every entry, newest first, filtered in Python."""
    with store.backend.read() as tx:
        rows = list(tx.iter_newest("agent"))
    return [r.key for r in rows if (prefix is None or r.key.startswith(prefix))
            and (category is None or r.category is category)]


@pytest.mark.parametrize("query", [
    {"limit": 10}, {"limit": 10, "category": "CACHE"},
    {"limit": 10, "since": "2000-01-01T00:00:00Z"},
    {"limit": 10, "until": "2999-01-01T00:00:00Z"},
    {"limit": 10, "category": "PATTERN", "since": "2000-01-01T00:00:00Z"},
])
def test_sqlite_first_page_is_the_limit_on_a_recency_index(tmp_path: Path,
                                                           query: dict[str, Any]) -> None:
    store = MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / 'm.db'}")
    _fill(store, 60, 5)
    memory = store.for_gene("agent", GENE, None)
    with _Traced(store) as traced:
        found = memory.query_memory(query)
    assert len(found) == 10
    [page] = traced.pages()  # one statement answered it
    assert page.endswith("LIMIT 10")  # not 256 rows for a page of 10
    plan = traced.plan(page)
    assert not any("TEMP B-TREE" in step for step in plan), plan
    index = "memory_entries_cleanup" if "category" in query else "memory_entries_recent"
    assert any(index in step for step in plan), plan
    store.close()


def test_sqlite_dense_prefix_is_served_by_the_recency_index(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / 'm.db'}")
    _fill(store, 60, 5)
    memory = store.for_gene("agent", GENE, None)
    with _Traced(store) as traced:
        found = memory.query_memory({"keyPrefix": "f/", "limit": 10})
    assert [e.key for e in found] == _newest(store, "f/")[:10]
    [page] = traced.pages()  # the probe of the newest 40 answered it
    plan = traced.plan(page)
    # The newest 40 rowids from the recency index, then those 40 rows by rowid:
    # the key index (every matching row, sorted) is not touched.
    assert any("memory_entries_recent" in step for step in plan), plan
    assert not any("autoindex" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan
    _assert_sorts_row_ids_only(plan)
    assert "LIMIT 40) AS w CROSS JOIN" in page
    assert page.endswith("LIMIT 10")  # it stops at the page's last match
    store.close()


def test_sqlite_rare_prefix_takes_the_key_range(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / 'm.db'}")
    _fill(store, 60, 5, tail=30)
    memory = store.for_gene("agent", GENE, None)
    with _Traced(store) as traced:
        found = memory.query_memory({"keyPrefix": "q/", "limit": 4})
    assert [e.key for e in found] == _newest(store, "q/")[:4]
    _, by_key = traced.pages()  # no q/ among the newest 16: the range answers
    assert any("autoindex" in step and "key>? AND key<?" in step
               for step in traced.plan(by_key)), traced.plan(by_key)
    assert "LIMIT 4) AS w CROSS JOIN" in by_key
    _assert_sorts_row_ids_only(traced.plan(by_key))
    store.close()


def _assert_sorts_row_ids_only(plan: list[str]) -> None:
    """A prefix page's plan: its row ids picked in a subquery (a co-routine or a
    materialized one; any sort is of row ids and times), then the rows read by
    row id in that order, the subquery the outer loop -- no sort of whole rows
    after the join, whose order would otherwise be the subquery's only by chance."""
    scan = next(i for i, step in enumerate(plan) if step.startswith("SCAN w"))
    assert plan[scan + 1].startswith("SEARCH e USING INTEGER PRIMARY KEY"), plan
    assert len(plan) == scan + 2, plan  # nothing (no TEMP B-TREE) after the join


def test_sqlite_many_old_matches_are_found_by_a_wider_probe(tmp_path: Path) -> None:
    """The bench's shape: most keys under ``f/``, all older than the newest
    entries.  The first probe (the 40 newest) finds none; counting the key range
    up to 320 shows at least 320 keys, too many to sort; the second probe (the
    160 newest) finds the page.  No statement sorts the 700 matches."""
    store = MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / 'm.db'}")
    store.create_agent("agent", quota_bytes=10**9)
    memory = store.for_gene("agent", GENE, None)
    for i in range(700):
        memory.write_memory(f"f/{i}", b"v", Category.CACHE)
    for i in range(60):
        memory.write_memory(f"n/{i}", b"v", Category.CACHE)
    with _Traced(store) as traced:
        found = memory.query_memory({"keyPrefix": "f/", "limit": 10})
    assert [e.key for e in found] == _newest(store, "f/")[:10]
    probes = traced.pages()
    # 40 newest: no f/; 700 f/ keys >= the cap of 320: probe the 160 newest.
    assert [p.split("LIMIT ")[1].split(")")[0] for p in probes] == ["40", "160"], probes
    counts = [s for s in traced.statements if s.startswith("SELECT count(*)")]
    assert len(counts) == 1 and counts[0].endswith("LIMIT 320)")
    plan = traced.plan(counts[0])
    assert any("COVERING INDEX sqlite_autoindex" in step for step in plan), plan
    store.close()


@pytest.mark.parametrize("prefix", ["f/", "q/", "f/x", "f/1", "z", "", "f/y2"])
@pytest.mark.parametrize("limit", [1, 3, 50, 1000])
def test_sqlite_prefix_pages_match_the_reference(tmp_path: Path, prefix: str, limit: int
                                                 ) -> None:
    """Whichever plan each page takes, the answer is the newest ``limit`` under
    the prefix, and every page after the first continues exactly."""
    store = MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / 'm.db'}")
    _fill(store, 300, 40)
    memory = store.for_gene("agent", GENE, None)
    query: dict[str, Any] = {"limit": limit}
    if prefix:
        query["keyPrefix"] = prefix
    assert [e.key for e in memory.query_memory(query)] == _newest(store, prefix)[:limit]
    with store.backend.read() as tx:
        every = [r.key for r in tx.iter_newest("agent", key_prefix=prefix or None, first=limit)]
        cached = [r.key for r in tx.iter_newest("agent", key_prefix=prefix or None,
                                                category=Category.CACHE, first=limit)]
    assert every == _newest(store, prefix)
    assert cached == _newest(store, prefix, Category.CACHE)
    store.close()


def test_sqlite_memory_list_page_is_the_key_index(tmp_path: Path) -> None:
    """``agent memory list --limit N``: N + 1 rows on the (agent, key) index in
    key order (no sort, however many entries), and the pages join up."""
    store = MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / 'm.db'}")
    _fill(store, 60, 5)
    with _Traced(store) as traced:
        entries, after = store.deployer("agent").page(limit=10)
    [page] = [s for s in traced.statements if "ORDER BY key" in s]
    assert page.endswith("LIMIT 11")
    plan = traced.plan(page)
    assert any("autoindex" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan
    assert after == entries[-1].key and len(entries) == 10
    store.close()


def test_memory_list_pages_join_up(store_factory: StoreFactory) -> None:
    store = store_factory()
    _fill(store, 30, 5)
    every = sorted(_newest(store))
    for category in (None, Category.CACHE):
        paged: list[str] = []
        after: str | None = None
        while True:
            entries, after = store.deployer("agent").page(category, after, 7)
            paged += [e.key for e in entries]
            if after is None:
                break
        assert paged == [k for k in every if category is None
                         or k in _newest(store, category=category)]


def test_sqlite_read_is_three_index_searches(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{db}").close()
    conn = sqlite3.connect(db)
    plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + lookup_sql("?"), (1, "k", "a"))]
    conn.close()
    assert not any(step.startswith("SCAN") for step in plan), plan
    assert any("memory_entries_expiry" in step for step in plan), plan


def _explain(conn: psycopg.Connection[tuple[Any, ...]], sql: str, params: tuple[Any, ...]
             ) -> str:
    return "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))


@pytest.mark.postgres
def test_postgres_plans_walk_an_index_in_recency_order(pg_fresh_url: str,
                                                       tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path / ".rotifer", url=pg_fresh_url)
    store.create_agent("agent", quota_bytes=10**12)
    store.create_agent("small", quota_bytes=10**12)
    store.close()
    with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
        for agent, n in (("agent", 20000), ("small", 100)):
            # 1 in 100 keys under q/, the rest under f/; 1 in 7 expires.
            conn.execute(
                "INSERT INTO memory_entries SELECT %s, CASE WHEN i %% 100 = 0 THEN 'q/' "
                "ELSE 'f/' END || i, (ARRAY['CACHE','PATTERN','CONTEXT','PREFERENCE'])"
                "[1 + i %% 4], 'x', 10, 'g', NULL, 'g', i, i, 'ALL_GENES', 'ALL_GENES', "
                "'PRIVATE', NULL, CASE WHEN i %% 7 = 0 THEN 10000000 + i END, i "
                "FROM generate_series(1, %s) i", (agent, n))
        conn.execute("ANALYZE memory_entries")
        for agent in ("agent", "small"):
            for shape in ({}, {"category": Category.CACHE}, {"since_us": 5},
                          {"until_us": 5000}, {"category": Category.PATTERN, "since_us": 5},
                          {"key_prefix": "f/"}):
                filters: dict[str, Any] = {"category": None, "key_prefix": None,
                                           "since_us": None, "until_us": None, **shape}
                sql, params = newest_sql("%s", agent, **filters)
                plan = _explain(conn, sql.format(after="", limit=10), params)
                assert "Index Scan Backward" in plan and "Sort" not in plan, (shape, plan)
            # A rare prefix: the key range, sorting only the rows it matches.
            sql, params = newest_sql("%s", agent, None, "q/", None, None)
            plan = _explain(conn, sql.format(after="", limit=10), params)
            assert "memory_entries_pkey" in plan, plan
            plan = _explain(conn, lookup_sql("%s"), (1, "f/1", agent))
            assert "Seq Scan" not in plan, plan
            plan = _explain(conn, "SELECT key FROM memory_entries WHERE agent_id = %s "
                            "ORDER BY key LIMIT 11", (agent,))
            assert "memory_entries_pkey" in plan and "Sort" not in plan, plan


_examples = iter(range(10**9))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.tuples(st.sampled_from(["a/", "a/b", "ab", "b/", "", "\U0010ffff"]),
                               st.integers(0, 40), st.sampled_from(CATEGORIES),
                               st.integers(0, 5)), min_size=0, max_size=120),
       prefix=st.sampled_from(["a/", "a", "b/", "ab", "\U0010ffff", "z"]),
       category=st.none() | st.sampled_from(CATEGORIES),
       since=st.none() | st.integers(0, 5), until=st.none() | st.integers(0, 6),
       first=st.integers(1, 12))
def test_sqlite_prefix_race_matches_a_plain_model(
        tmp_path: Path, keys: list[tuple[str, int, Category, int]], prefix: str,
        category: Category | None, since: int | None, until: int | None, first: int) -> None:
    """Whatever the mix of matches and their ages, every page of the race gives
    exactly the model's answer: matching rows, newest first, ties by seq."""
    db = tmp_path / "race.db"
    backend = SqliteBackend(db)
    agent = f"agent-{next(_examples)}"
    model: dict[str, tuple[int, int, Category]] = {}
    with backend.write(agent) as tx:
        tx.insert_agent(AgentRecord(agent, 10**9, DataPolicy(), 0, 1))
        for seq, (head, n, cat, updated) in enumerate(keys, 1):
            key = f"{head}{n}"
            tx.put(Row(agent, key, cat, b"v", GENE, None, GENE, updated, updated,
                       DEFAULT_ACCESS_POLICY, None, None, seq))
            model[key] = (updated, seq, cat)
    with backend.read() as tx:
        got = [r.key for r in tx.iter_newest(agent, category=category, key_prefix=prefix,
                                             since_us=since, until_us=until, first=first)]
    backend.close()
    expected = sorted(
        (k for k, (u, _, c) in model.items() if k.startswith(prefix)
         and (category is None or c is category) and (since is None or u >= since)
         and (until is None or u < until)),
        key=lambda k: (model[k][0], model[k][1]), reverse=True)
    assert got == expected
