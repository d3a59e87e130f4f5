"""The lean paths (rotifer.memory.views.gene_view) against the full ones, on the same operations.

Two stores on their own databases and their own audit logs, one clock: store
``lean`` takes the lean write, read and query paths wherever they apply,
store ``full`` has ``lean_paths`` off and never does.  On PostgreSQL the
store ``lean`` has them turned on (the backend's own choice is off there, see
``test_postgres_takes_the_full_paths``), so they are held to the same answers.  Hypothesis runs
random sequences of writes, reads, queries, deletes and clock steps on both,
including every case a lean path hands to the full one: a write that must
evict, a write refused for quota or by a scope, policies given, an entry that
expired, a read by a new reader, a query past its first page, a gene without
an id and invalid input.  After each operation the answers (entry, list or
error code and message) and the two audit logs, byte for byte, must be equal;
at the end the stored rows and the agents' records too.  The agents' epochs
are fixed (``new_epoch``), so the hash chains are the same bytes.

A spy counts which way each call went, so the run shows that both the lean
answers and every path's fallbacks were exercised.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rotifer.memory import AgentMemoryError, DataPolicy, ManualClock, MemoryStore
from rotifer.memory.views.gene_memory import GeneMemory
from rotifer.memory.views.gene_view import FULL

from .conftest import StoreFactory
from .helpers import gene_id

GENES = [(gene_id("g1"), "d1"), (gene_id("g2"), "d1"), (gene_id("g3"), "d2"), (None, None)]
KEYS = ["a/1", "a/2", "b/1", "ü/x"]
CATEGORIES = ["PREFERENCE", "PATTERN", "CONTEXT", "CACHE"]
ONE_DAY = {"maxRetentionDays": 1, "autoDeleteOnTermination": False,
           "anonymizationSupported": False}
CREATOR_ONLY = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
                "sharePolicy": "PRIVATE"}
ALL_GENES = {"readScope": "ALL_GENES", "writeScope": "ALL_GENES", "sharePolicy": "PRIVATE"}
#: "tiny" fills up after a few writes (evictions, quota refusals); "roomy" never does.
AGENTS = {"tiny": 160, "roomy": 10 * 1024 * 1024}

#: Mostly the first gene: its writes and reads of its own entries are the lean paths.
GENE_NUMBERS = st.sampled_from([0, 0, 0, 0, 1, 2, 3])
write_op = st.tuples(
    st.just("write"), st.sampled_from(sorted(AGENTS)), GENE_NUMBERS,
    st.sampled_from(KEYS), st.binary(max_size=60), st.sampled_from(CATEGORIES),
    st.sampled_from([None] * 6 + [CREATOR_ONLY, ALL_GENES]),
    st.sampled_from(["unset"] * 6 + [None, ONE_DAY]))
read_op = st.tuples(st.just("read"), st.sampled_from(sorted(AGENTS)),
                    GENE_NUMBERS, st.sampled_from(KEYS),
                    st.sampled_from([None, None, "CACHE"]))
query_op = st.tuples(st.just("query"), st.sampled_from(sorted(AGENTS)),
                     GENE_NUMBERS,
                     st.sampled_from([None, {}, {"keyPrefix": "a/"}, {"limit": 1},
                                      {"limit": 2, "keyPrefix": "a/"}, {"category": "CACHE"},
                                      {"limit": 0}]))
delete_op = st.tuples(st.just("delete"), st.sampled_from(sorted(AGENTS)),
                      GENE_NUMBERS, st.sampled_from(KEYS))
clock_op = st.tuples(st.just("advance"), st.sampled_from([1, 1000, 3_600_000_000,
                                                          2 * 86_400_000_000]))
odd_op = st.tuples(st.just("odd"), st.sampled_from(sorted(AGENTS)),
                   st.sampled_from(["empty key", "bytearray", "category", "long key",
                                    "int value"]))
OPS = st.lists(st.one_of(write_op, write_op, write_op, read_op, read_op, query_op, delete_op, clock_op, odd_op),
               min_size=8, max_size=40)


def _w(agent: str, gene: int, key: str, value: bytes, category: str = "CACHE",
       access: Any = None, retention: Any = "unset") -> tuple[Any, ...]:
    return ("write", agent, gene, key, value, category, access, retention)


#: Every way each path goes, for certain (the random sequences find them less often).
EXAMPLES = [
    # lean: a new entry, its update, a read and a query by its writer
    [_w("roomy", 0, "a/1", b"x"), ("advance", 1000), _w("roomy", 0, "a/1", b"yy", "PATTERN"),
     ("read", "roomy", 0, "a/1", None), ("query", "roomy", 0, {"keyPrefix": "a/"}),
     ("query", "roomy", 0, None)],
    # full: evictions, then a refusal for quota (PREFERENCE is never evicted)
    [_w("tiny", 0, "a/1", b"c" * 50), _w("tiny", 0, "a/2", b"c" * 50),
     _w("tiny", 0, "b/1", b"p" * 50, "PREFERENCE"), _w("tiny", 0, "ü/x", b"p" * 60, "PREFERENCE"),
     _w("tiny", 0, "a/1", b"p" * 100, "PREFERENCE")],
    # full: expiry (the tiny agent keeps entries 2 days) before a write, a read, a query
    [_w("tiny", 0, "a/1", b"x"), _w("tiny", 0, "a/2", b"x"), ("advance", 2 * 86_400_000_000),
     _w("tiny", 0, "b/1", b"x"), ("advance", 2 * 86_400_000_000),
     ("read", "tiny", 0, "b/1", None), _w("tiny", 0, "a/2", b"y"), ("advance", 1),
     ("advance", 2 * 86_400_000_000), ("query", "tiny", 0, None)],
    # full: refusals by scope; a new reader noted; a query past its first page
    [_w("roomy", 0, "a/1", b"x", access=CREATOR_ONLY), _w("roomy", 1, "a/1", b"y"),
     ("read", "roomy", 1, "a/1", None), _w("roomy", 0, "a/2", b"x"),
     ("read", "roomy", 2, "a/2", None), ("read", "roomy", 1, "a/2", None),
     ("query", "roomy", 1, {"limit": 1}), ("query", "roomy", 2, None),
     ("delete", "roomy", 1, "a/1"),
     _w("roomy", 3, "a/2", b"z"), ("read", "roomy", 3, "a/2", None)],
    # lean: an entry with its own retention policy and access policy, read and queried
    [_w("roomy", 0, "a/1", b"x", access=ALL_GENES, retention=ONE_DAY),
     ("read", "roomy", 0, "a/1", None), ("query", "roomy", 0, {"keyPrefix": "a/"}),
     ("read", "roomy", 0, "a/2", None), ("query", "roomy", 0, {"keyPrefix": "b/"})],
    # policies given, odd input
    [_w("roomy", 0, "a/1", b"x", retention=ONE_DAY), _w("roomy", 0, "a/1", b"x", access=ALL_GENES),
     ("odd", "roomy", "empty key"), ("odd", "roomy", "bytearray"), ("odd", "roomy", "category"),
     ("odd", "roomy", "long key"), ("odd", "roomy", "int value"),
     ("read", "roomy", 0, "a/1", "CACHE")],
]


def outcome(call: Callable[[], Any]) -> Any:
    """What a call answered, in a form two stores' answers can be compared in."""
    try:
        result = call()
    except AgentMemoryError as exc:
        return ("error", exc.code, exc.message)
    if isinstance(result, list):
        return [e.to_json() for e in result]
    return None if result is None else result.to_json()


def act(store: MemoryStore, op: tuple[Any, ...], clock: ManualClock) -> Any:
    kind = op[0]
    if kind == "advance":
        return None  # the clock is shared: moved once, by the caller
    agent = op[1]
    if kind == "odd":
        memory = store.for_gene(agent, *GENES[0])
        args: dict[str, tuple[Any, ...]] = {
            "empty key": ("", b"v", "CACHE"), "bytearray": ("a/1", bytearray(b"v"), "CACHE"),
            "category": ("a/1", b"v", "NOPE"), "long key": ("k" * 1025, b"v", "CACHE"),
            "int value": ("a/1", 7, "CACHE")}
        return outcome(lambda: memory.write_memory(*args[op[2]]))
    memory = store.for_gene(agent, *GENES[op[2]])
    if kind == "write":
        _, _, _, key, value, category, access, retention = op
        if retention == "unset":
            return outcome(lambda: memory.write_memory(key, value, category, access))
        return outcome(lambda: memory.write_memory(key, value, category, access, retention))
    if kind == "read":
        return outcome(lambda: memory.read_memory(op[3], op[4]))
    if kind == "query":
        return outcome(lambda: memory.query_memory(op[3]))
    return outcome(lambda: memory.delete_memory(op[3]))


def log_bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def state(store: MemoryStore) -> list[Any]:
    """Every stored row and every agent's record."""
    found: list[Any] = []
    with store.backend.read() as tx:
        for agent in sorted(AGENTS):
            found.append(tx.get_agent(agent))
            found.extend(tx.iter_by_key(agent))
    return found


@pytest.fixture
def ways(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How each call went: ``write lean``, ``write full``, ... (a spy on the three)."""
    counts: Counter[str] = Counter()
    for name in ("_write_lean", "_read_lean", "_query_lean"):
        real = getattr(GeneMemory, name)

        def spy(*args: Any, _real: Any = real, _name: str = name) -> Any:
            answer = _real(*args)
            counts[f"{_name[1:-5]} {'full' if answer is FULL else 'lean'}"] += 1
            return answer
        monkeypatch.setattr(GeneMemory, name, spy)
    # One epoch for every agent of both stores: the two logs are then the same bytes.
    monkeypatch.setattr("rotifer.memory.store.new_epoch", lambda: "0123456789ab")
    return counts


def test_lean_and_full_paths_answer_log_and_store_alike(
        store_factory: StoreFactory, tmp_path: Path, backend: str, ways: Counter[str]) -> None:
    names = itertools.count()

    @settings(max_examples=100 if backend == "sqlite" else 15, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])
    @given(ops=OPS)
    @example(ops=EXAMPLES[0])
    @example(ops=EXAMPLES[1])
    @example(ops=EXAMPLES[2])
    @example(ops=EXAMPLES[3])
    @example(ops=EXAMPLES[4])
    @example(ops=EXAMPLES[5])
    def run(ops: list[tuple[Any, ...]]) -> None:
        n = next(names)
        clock = ManualClock("2026-03-01T12:00:00Z")
        stores = {}
        for way in ("lean", "full"):
            stores[way] = store_factory(tmp_path / f"{way}{n}", clock=clock, name=f"{way}{n}")
        stores["lean"].lean_paths, stores["full"].lean_paths = True, False
        for store in stores.values():
            for agent, quota in AGENTS.items():
                store.create_agent(agent, quota_bytes=quota,
                                   data_policy=DataPolicy(2, False) if agent == "tiny" else None)
        logs = {way: tmp_path / f"{way}{n}" / "audit.jsonl" for way in stores}
        try:
            for op in ops:
                if op[0] == "advance":
                    clock.advance(micros=op[1])
                assert act(stores["lean"], op, clock) == act(stores["full"], op, clock), op
                assert log_bytes(logs["lean"]) == log_bytes(logs["full"]), op
            assert state(stores["lean"]) == state(stores["full"])
        finally:
            for store in stores.values():
                store.close()

    run()
    # Both ways of every path were taken (the fallbacks included).
    for path in ("write", "read", "query"):
        assert ways[f"{path} lean"] > 0 and ways[f"{path} full"] > 0, ways


def test_stored_policies_are_answered_by_the_lean_read_and_query(
        store_factory: StoreFactory, tmp_path: Path, backend: str, ways: Counter[str]) -> None:
    """The lean read and query decode a stored retention policy and a non-default
    access policy themselves (``retention_of``, the policy table) instead of
    handing them to the full path, and answer what the full path answers."""
    answers = []
    for way in ("lean", "full"):
        clock = ManualClock("2026-03-01T12:00:00Z")  # the same times on both stores
        store = store_factory(tmp_path / way, clock=clock, name=way)
        store.lean_paths = way == "lean"
        try:
            store.create_agent("roomy")
            memory = store.for_gene("roomy", *GENES[0])
            memory.write_memory("a/1", b"x", "CACHE", ALL_GENES, ONE_DAY)
            memory.write_memory("a/2", b"y", "PATTERN", CREATOR_ONLY, None)
            answers.append([outcome(lambda m=memory: m.read_memory("a/1")),
                            outcome(lambda m=memory: m.read_memory("a/2")),
                            outcome(lambda m=memory: m.query_memory({"keyPrefix": "a/"}))])
        finally:
            store.close()
    assert answers[0] == answers[1]
    assert answers[0][0]["retentionPolicy"] == ONE_DAY
    assert answers[0][0]["accessPolicy"] == ALL_GENES
    assert ways["read lean"] == 2 and ways["query lean"] == 1, ways
    assert ways["read full"] == 0 and ways["query full"] == 0, ways


def test_postgres_takes_the_full_paths(store_factory: StoreFactory, tmp_path: Path,
                                       backend: str) -> None:
    """A lean path's hand-over to the full one repeats its lookup: a statement in
    process on SQLite, round trips on PostgreSQL (tests/bench's round-trip table
    pins the counts), so only SQLite takes them by default."""
    store = store_factory(tmp_path / "s", name="s")
    try:
        assert store.lean_paths is (backend == "sqlite")
    finally:
        store.close()


def test_a_prefix_without_an_upper_bound_goes_the_full_way(
        store_factory: StoreFactory, tmp_path: Path, backend: str, ways: Counter[str]) -> None:
    """The lean query checks each key against the prefix's range [prefix, bound);
    a prefix of U+10FFFF only has no bound, so the full path answers it -- the
    same entries as a prefix with one."""
    store = store_factory(tmp_path / "s", name="s")
    store.lean_paths = True
    try:
        store.create_agent("roomy")
        memory = store.for_gene("roomy", *GENES[0])
        for key in ("\U0010ffff", "\U0010ffffa", "\U0010fffe", "a"):
            memory.write_memory(key, b"x", "CACHE")
        assert [e.key for e in memory.query_memory({"keyPrefix": "\U0010ffff"})] == \
            ["\U0010ffffa", "\U0010ffff"]
        assert ways["query full"] == 1 and ways["query lean"] == 0, ways
        assert [e.key for e in memory.query_memory({"keyPrefix": "\U0010fffe"})] == \
            ["\U0010fffe"]
        assert ways["query lean"] == 1, ways
    finally:
        store.close()
