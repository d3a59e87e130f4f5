"""``Transaction.oldest_to_free`` takes exactly the entries the cleanup rule
names (issue 33, target 3: on SQLite its rows are now fetched in batches and
cut by their running sum instead of stepped one by one): a category's entries
least recently updated first, ties in write order, never the entry being
written, as many as free ``need`` bytes -- all of them when they free less.
Checked on both backends against the rule worked out in the test, on entries
of random sizes (so a batch meets larger entries than the ones before it),
many sharing one update time, for every ``need`` from 1 to past their total.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rotifer.memory import MemoryStore
from rotifer.memory.model import DEFAULT_ACCESS_POLICY, Category
from rotifer.memory.storage.backend import Brief, Row

from .helpers import gene_id

A = gene_id("a")
T0 = 1_772_366_400_000_000


def expected(entries: list[Row], need: int, passing: str) -> list[Brief]:
    order = sorted((r for r in entries if r.key != passing), key=lambda r: (r.updated_us, r.seq))
    taken = []
    for r in order:
        if need <= 0:
            break
        taken.append(Brief(r.key, r.category, r.size, r.updated_us, r.seq, r.created_by))
        need -= r.size
    return taken


def test_the_candidates_are_the_rule_s(store: MemoryStore) -> None:
    @settings(max_examples=25, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.integers(1, 300), min_size=1, max_size=40), st.randoms())
    def run(sizes: list[int], rnd: random.Random) -> None:
        with store.backend.write("agent") as tx:
            tx.delete("agent", [r.key for r in tx.iter_by_key("agent")])
            rows = []
            for i, size in enumerate(sizes):
                key = f"c/{i:03d}"
                value = b"v" * max(size - len(key), 0)
                rows.append(Row(agent_id="agent", key=key, category=Category.CACHE,
                                value=value, created_by=A, creator_domain="d",
                                last_accessed_by=A, created_us=T0,
                                updated_us=T0 + rnd.randrange(4), access=DEFAULT_ACCESS_POLICY,
                                retention=None, expires_us=None, seq=rnd.randrange(1, 10**6)))
            for row in rows:
                tx.put(row)
        total = sum(r.size for r in rows)
        passing = rnd.choice([rows[0].key, "none"])
        with store.backend.write("agent") as tx:
            for need in range(1, total + 40, max(1, total // 60)):
                assert tx.oldest_to_free("agent", Category.CACHE, need, passing) == \
                    expected(rows, need, passing), need
            assert tx.oldest_to_free("agent", Category.PATTERN, 10, passing) == []
    run()
