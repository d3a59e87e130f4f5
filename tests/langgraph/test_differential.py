"""Differential tests: the same random sequences of LangGraph operations on
``InMemoryStore`` (LangGraph's reference) and on ``RotiferStore`` (SQLite and
PostgreSQL), comparing every result, within the differences docs/langgraph.md
documents:

- ``search`` orders newest first (as SqliteStore and PostgresStore do); the
  reference's answer is put in that order (by the test's own record of the
  last write) before ``offset`` and ``limit`` are applied to it;
- ``list_namespaces`` lists namespaces that hold an item; the reference also
  keeps namespaces emptied by a delete or merely read, which are pruned from
  it before each comparison;
- timestamps are compared by order, not value.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, Item, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from rotifer.langgraph import RotiferStore
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import gene_id

LABELS = st.sampled_from(["users", "alice", "bob", "a/b", "50%", "*", "é"])
NAMESPACES = st.lists(LABELS, min_size=1, max_size=3).map(tuple)
KEYS = st.sampled_from(["prefs", "", "x/y", "%00", "k\x00", "théme"])
VALUES = st.fixed_dictionaries(
    {"n": st.integers(-3, 3)},
    optional={"tag": st.sampled_from(["a", "b", "c"]),
              "meta": st.fixed_dictionaries({"k": st.sampled_from([1, "1", None])}),
              "list": st.lists(st.integers(0, 2), max_size=2)})
FILTERS = st.one_of(
    st.none(),
    st.fixed_dictionaries({}, optional={
        "n": st.one_of(st.integers(-3, 3), st.dictionaries(
            st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]),
            st.integers(-3, 3), min_size=1, max_size=2)),
        "tag": st.one_of(st.sampled_from(["a", "b"]), st.fixed_dictionaries(
            {"$ne": st.sampled_from(["a", "b"])})),
        "meta": st.fixed_dictionaries({"k": st.sampled_from([1, "1", None])}),
        "list": st.lists(st.integers(0, 2), max_size=2)}))
PATHS = st.lists(st.one_of(LABELS, st.just("*")), max_size=2).map(tuple)

PUT = st.builds(lambda ns, k, v: PutOp(ns, k, v), NAMESPACES, KEYS, VALUES)
DELETE = st.builds(lambda ns, k: PutOp(ns, k, None), NAMESPACES, KEYS)
GET = st.builds(lambda ns, k: GetOp(ns, k), NAMESPACES, KEYS)
SEARCH = st.builds(lambda ns, f, lim, off: SearchOp(ns, f, lim, off),
                   st.lists(LABELS, max_size=2).map(tuple), FILTERS,
                   st.integers(0, 6), st.integers(0, 4))
LIST = st.builds(
    lambda pre, suf, depth, lim, off: ListNamespacesOp(
        tuple(MatchCondition(t, p) for t, p in (("prefix", pre), ("suffix", suf)) if p),
        depth, lim, off),
    PATHS, PATHS, st.none() | st.integers(1, 3), st.integers(1, 8), st.integers(0, 3))
ONE_OP = st.one_of(PUT, PUT, DELETE, GET, SEARCH, LIST)
# A step is one op, or a batch of several (reads first, then puts, in both stores).
STEPS = st.lists(st.lists(ONE_OP, min_size=1, max_size=4), min_size=1, max_size=14)

_agents = itertools.count()


class Reference:
    """InMemoryStore plus the write order it does not keep."""

    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.clock = itertools.count()
        self.written: dict[tuple[tuple[str, ...], str], int] = {}

    def run(self, ops: list[Any]) -> list[Any]:
        # The reads one by one (pruning before each), then the puts: the batch
        # order of both stores.  A search takes everything matching, then is
        # ordered newest first and cut as documented.
        results: list[Any] = []
        for op in ops:
            if isinstance(op, PutOp):
                results.append(None)
                continue
            self.prune()
            if isinstance(op, SearchOp):
                found = sorted(self.store.batch([op._replace(limit=10**6, offset=0)])[0],
                               key=lambda it: -self.written[(it.namespace, it.key)])
                results.append(found[op.offset:op.offset + op.limit])
            else:
                results.append(self.store.batch([op])[0])
        puts = [op for op in ops if isinstance(op, PutOp)]
        self.store.batch(puts)
        for where, op in {(op.namespace, op.key): op for op in puts}.items():
            if op.value is None:
                self.written.pop(where, None)
            else:
                self.written[where] = next(self.clock)
        return results

    def prune(self) -> None:
        # InMemoryStore keeps a namespace once deleted from or read (a defaultdict).
        for namespace in [ns for ns, items in self.store._data.items() if not items]:
            del self.store._data[namespace]


def _plain(result: Any) -> Any:
    if isinstance(result, Item):
        return (result.namespace, result.key, result.value)
    if isinstance(result, list):
        return [_plain(r) for r in result]
    return result


def _check_times(result: Any) -> None:
    for item in result if isinstance(result, list) else [result]:
        if isinstance(item, Item):
            assert item.created_at <= item.updated_at and item.updated_at.tzinfo is not None
    if isinstance(result, list) and result and isinstance(result[0], Item):
        times = [item.updated_at for item in result]
        assert times == sorted(times, reverse=True)  # newest first


def run_against_reference(factory: StoreFactory, steps: list[list[Any]], *,
                          use_async: bool = False) -> None:
    memory = factory()
    agent = f"lg{next(_agents)}"
    memory.create_agent(agent)
    ours = RotiferStore.for_gene(memory, agent, gene_id("graph"), "graphs")
    reference = Reference()
    for ops in steps:
        expected = reference.run(ops)
        got = asyncio.run(ours.abatch(ops)) if use_async else ours.batch(ops)
        assert [_plain(r) for r in got] == [_plain(r) for r in expected], ops
        for result in got:
            _check_times(result)


def runs(examples: int) -> Any:
    """Hypothesis settings: ``examples`` sequences, no deadline (the machine is shared)."""
    return settings(max_examples=examples, deadline=None, suppress_health_check=[
        HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.parametrize("backend", ["sqlite"])
@given(steps=STEPS)
@runs(60)
def test_sqlite_answers_as_in_memory_store(store_factory: StoreFactory,
                                           steps: list[list[Any]]) -> None:
    run_against_reference(store_factory, steps)


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"])
@given(steps=STEPS)
@runs(15)
def test_postgres_answers_as_in_memory_store(store_factory: StoreFactory,
                                             steps: list[list[Any]]) -> None:
    run_against_reference(store_factory, steps, use_async=True)


@pytest.mark.slow
@given(steps=STEPS, use_async=st.booleans())
@runs(600)
def test_long_run_answers_as_in_memory_store(store_factory: StoreFactory,
                                             steps: list[list[Any]], use_async: bool) -> None:
    run_against_reference(store_factory, steps, use_async=use_async)
