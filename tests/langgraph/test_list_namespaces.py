"""``list_namespaces`` lists folders in the database, one entry read per
namespace (rotifer.memory.views.folders, issue 32), and answers what InMemoryStore
answers on random namespaces -- with entries beside the items that are no
LangGraph item (a gene's own bytes under the root, keys the mapping never
makes) and another gene's private items, which it must not list."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import ListNamespacesOp, MatchCondition
from langgraph.store.memory import InMemoryStore

from rotifer.langgraph import RotiferStore
from rotifer.langgraph.keys import namespace_prefix
from rotifer.memory import MemoryStore
from tests.langgraph.test_differential import runs
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import gene_id

GENE, OTHER = gene_id("lister"), gene_id("stranger")
PRIVATE = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
           "sharePolicy": "PRIVATE"}
LABELS = st.sampled_from(["a", "b", "a-b", "a/b", "50%", "é", "z"])
NAMESPACES = st.lists(LABELS, min_size=1, max_size=4).map(tuple)
PATHS = st.lists(st.one_of(LABELS, st.just("*")), max_size=3).map(tuple)
LISTS = st.builds(
    lambda pre, suf, depth, lim, off: ListNamespacesOp(
        tuple(MatchCondition(t, p) for t, p in (("prefix", pre), ("suffix", suf)) if p),
        depth, lim, off),
    PATHS, PATHS, st.none() | st.integers(1, 4), st.integers(1, 30), st.integers(0, 5))
#: Keys under the root that are no item: bytes that are not a JSON object, a
#: label with ".", a lower-case escape, a bare "%".
JUNK = st.sampled_from([("langgraph/a/", b"not json"), ("langgraph/a.b/", b"{}"),
                        ("langgraph/a%2fb/", b"{}"), ("langgraph/b/%/", b"{}"),
                        ("langgraph/z/", b"[1]")])

#: Entries that are no item, beside the items of a namespace (which one: an
#: index into the items), with keys that sort before theirs.
BESIDE = st.tuples(st.integers(0, 24), st.sampled_from([b"not json", b"[1]", b"\xff"]))


def _stores(memory: MemoryStore, agent: str) -> tuple[RotiferStore, RotiferStore]:
    memory.create_agent(agent)
    return (RotiferStore.for_gene(memory, agent, GENE, "graphs"),
            RotiferStore.for_gene(memory, agent, OTHER, "graphs",
                                  namespaces={("z",): {"category": "CONTEXT",
                                                       "accessPolicy": PRIVATE}}))


def _compare(memory: MemoryStore, agent: str, items: list[tuple[tuple[str, ...], int]],
             junk: list[tuple[str, bytes]], beside: list[tuple[int, bytes]], hidden: list[tuple[str, ...]],
             lists: list[ListNamespacesOp]) -> None:
    ours, stranger = _stores(memory, agent)
    reference = InMemoryStore()
    for n, (namespace, key) in enumerate(items):
        ours.put(namespace, f"k{key}", {"n": n})
        reference.put(namespace, f"k{key}", {"n": n})
    gene = memory.for_gene(agent, GENE, "graphs")
    for n, (folder, value) in enumerate(junk):
        gene.write_memory(f"{folder}j{n}", value, "CONTEXT")
    for n, (at, value) in enumerate(beside):  # sorts before the items of their namespace
        if items:
            folder = namespace_prefix(items[at % len(items)][0])
            gene.write_memory(f"{folder}a{n}", value, "CONTEXT")
    for namespace in hidden:  # another gene's private items: not ours to list
        stranger.put(("z", *namespace), "secret", {"n": 0})
    for op in lists:
        assert ours.batch([op]) == reference.batch([op]), op


@pytest.mark.parametrize("backend", ["sqlite"])
@given(items=st.lists(st.tuples(NAMESPACES, st.integers(0, 3)), max_size=25),
       junk=st.lists(JUNK, max_size=4), beside=st.lists(BESIDE, max_size=4), hidden=st.lists(NAMESPACES, max_size=3),
       lists=st.lists(LISTS, min_size=1, max_size=6))
@runs(40)
def test_lists_as_in_memory_store_on_sqlite(store_factory: StoreFactory, items: Any,
                                            junk: Any, beside: Any, hidden: Any, lists: Any
                                            ) -> None:
    memory = store_factory()
    _compare(memory, f"ns{len(memory.agents())}", items, junk, beside, hidden, lists)


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"])
@given(items=st.lists(st.tuples(NAMESPACES, st.integers(0, 3)), max_size=25),
       junk=st.lists(JUNK, max_size=4), beside=st.lists(BESIDE, max_size=4), hidden=st.lists(NAMESPACES, max_size=3),
       lists=st.lists(LISTS, min_size=1, max_size=6))
@runs(12)
def test_lists_as_in_memory_store_on_postgres(store_factory: StoreFactory, items: Any,
                                              junk: Any, beside: Any, hidden: Any, lists: Any
                                            ) -> None:
    memory = store_factory()
    _compare(memory, f"ns{len(memory.agents())}", items, junk, beside, hidden, lists)
