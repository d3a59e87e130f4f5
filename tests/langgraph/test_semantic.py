"""Semantic search (issue 32): ``RotiferStore(..., index=...)`` ranks as
LangGraph's ``InMemoryStore`` does with the same embeddings, and the vectors
are memory under rotifer's rules -- quota, access policy, expiry, cleanup --
on SQLite and PostgreSQL.  The embeddings are deterministic letter counts: no
model is downloaded."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from rotifer.langgraph import RotiferStore
from rotifer.memory import AgentMemoryError, Category, ErrorCode, ManualClock, MemoryStore
from rotifer.memory.audit.verify import verify_agent
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import RETAIN_1_DAY, gene_id

GENE_A, GENE_B = gene_id("sem-a"), gene_id("sem-b")
DIMS = 26
MINE = {"category": "CONTEXT", "accessPolicy": {
    "readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
    "sharePolicy": "PRIVATE"}}
DOCS = {"apple": "apple apple pie", "banana": "banana bread", "cherry": "cherry tart",
        "mixed": "apple and banana", "zebra": "zzz"}


def letters(text: str) -> list[float]:
    return [float(text.lower().count(chr(97 + i))) for i in range(DIMS)]


def embed(texts: list[str]) -> list[list[float]]:
    return [letters(t) for t in texts]


async def aembed(texts: list[str]) -> list[list[float]]:
    await asyncio.sleep(0)
    return embed(texts)


class LetterEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return letters(text)


INDEX: dict[str, Any] = {"embed": embed, "dims": DIMS, "fields": ["text"]}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-03-01T12:00:00Z")


@pytest.fixture
def memory(store_factory: StoreFactory, tmp_path: Path, clock: ManualClock) -> MemoryStore:
    store = store_factory(tmp_path / ".rotifer", clock=clock)
    store.create_agent("bot")
    return store


def gene(memory: MemoryStore, gene_id: str = GENE_A, **options: Any) -> RotiferStore:
    options.setdefault("index", INDEX)
    return RotiferStore.for_gene(memory, "bot", gene_id, "graphs", **options)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b))


@pytest.mark.parametrize("embed_with", [embed, aembed, LetterEmbeddings()],
                         ids=["sync function", "async function", "Embeddings"])
def test_ranks_as_in_memory_store_does(memory: MemoryStore, embed_with: Any) -> None:
    index = {**INDEX, "embed": embed_with}
    ours, reference = gene(memory, index=index), InMemoryStore(index=index)  # type: ignore[arg-type]
    puts = [PutOp(("docs",), key, {"text": text, "n": n})
            for n, (key, text) in enumerate(DOCS.items())]
    searches = [SearchOp(("docs",), None, 10, 0, "apple"), SearchOp(("docs",), None, 2, 1, "bread"),
                SearchOp(("docs",), {"n": {"$gte": 2}}, 10, 0, "apple")]

    async def run(store: Any) -> list[Any]:
        await store.abatch(puts)
        return list(await store.abatch(searches))

    for got, want in zip(asyncio.run(run(ours)), asyncio.run(run(reference)), strict=True):
        assert [(i.key, i.score) for i in got] == [
            (i.key, pytest.approx(i.score, abs=1e-6)) for i in want]
    top = asyncio.run(run(ours))[0][0]
    assert top.key == "apple"
    assert top.score == pytest.approx(cosine(letters("apple"), letters(DOCS["apple"])), abs=1e-6)
    if not asyncio.iscoroutinefunction(embed_with):  # sync search too
        assert [i.key for i in ours.search(("docs",), query="cherry", limit=1)] == ["cherry"]


def test_index_per_put_and_items_without_vectors(memory: MemoryStore) -> None:
    store = gene(memory)
    store.put(("d",), "a", {"text": "apple", "other": "zzz"})
    store.put(("d",), "b", {"text": "zzz", "other": "banana"}, index=["other"])
    store.put(("d",), "c", {"text": "cherry"}, index=False)
    got = store.search(("d",), query="banana")
    assert [i.key for i in got] == ["b", "a", "c"]  # c has no vector: after, no score
    assert got[0].score == pytest.approx(1.0, abs=1e-6) and got[2].score is None
    store.put(("d",), "b", {"text": "banana"}, index=False)  # its vector goes
    assert memory.deployer("bot").read("langgraph.vectors/d/b") is None
    store.delete(("d",), "a")
    assert memory.deployer("bot").read("langgraph.vectors/d/a") is None
    assert [i.key for i in store.search(("d",), query="apple")] == ["b", "c"]


def test_vectors_are_memory_under_the_rules(memory: MemoryStore, clock: ManualClock) -> None:
    plain = gene(memory, index=None)
    plain.put(("d",), "x", {"text": "apple"})
    without = memory.usage("bot")[0]
    store = gene(memory, namespaces={("mine",): MINE, ("short",): {
        "category": "CONTEXT", "retentionPolicy": RETAIN_1_DAY}})
    store.put(("d",), "x", {"text": "apple"})
    vector = memory.deployer("bot").read("langgraph.vectors/d/x")
    assert vector is not None and vector.category is Category.CACHE  # recomputable
    assert memory.usage("bot")[0] == without + vector.size  # counts toward the quota
    # The item's access policy: another gene never ranks by it, nor reads the vector.
    store.put(("mine",), "secret", {"text": "apple apple"})
    other = gene(memory, GENE_B)
    assert [i.key for i in other.search((), query="apple")] == ["x"]
    assert [i.key for i in store.search((), query="apple")] == ["secret", "x"]
    with pytest.raises(AgentMemoryError) as denied:
        memory.for_gene("bot", GENE_B, "graphs").read_memory("langgraph.vectors/mine/secret")
    assert denied.value.code is ErrorCode.ACCESS_DENIED
    # The item's retention: both gone after it.
    store.put(("short",), "s", {"text": "banana"})
    clock.advance(days=2)
    assert memory.deployer("bot").read("langgraph.vectors/short/s") is None
    assert [i.key for i in store.search(("short",), query="banana")] == []


def test_a_stale_or_evicted_vector_is_not_used(store_factory: StoreFactory, tmp_path: Path
                                               ) -> None:
    memory = store_factory(tmp_path / ".rotifer")
    memory.create_agent("bot", quota_bytes=4000)
    store = gene(memory)
    store.put(("d",), "a", {"text": "apple"})
    store.put(("d",), "b", {"text": "cherry"})
    # A gene rewrites the item under the store: the vector no longer matches it.
    memory.for_gene("bot", GENE_A, "graphs").write_memory(
        "langgraph/d/a", b'{"text":"zzz"}', "CONTEXT")
    got = store.search(("d",), query="apple")
    assert [(i.key, i.score is None) for i in got] == [("b", False), ("a", True)]
    # Cleanup takes the vectors (CACHE) before any item.
    store.put(("d",), "big", {"text": "x" * 3800}, index=False)
    for key in ("a", "b"):
        assert memory.deployer("bot").read(f"langgraph.vectors/d/{key}") is None
        assert memory.deployer("bot").read(f"langgraph/d/{key}") is not None
    assert {i.key for i in store.search(("d",), query="cherry")} == {"a", "b", "big"}


def test_refusals_write_nothing(memory: MemoryStore) -> None:
    store = gene(memory, index={**INDEX, "dims": 3})
    with pytest.raises(ValueError, match="dims=3"):
        store.put(("d",), "a", {"text": "apple"})
    assert memory.deployer("bot").read("langgraph/d/a") is None
    with pytest.raises(ValueError, match="embed"):
        gene(memory, index={"dims": 3})
    with pytest.raises(ValueError, match="dims"):
        gene(memory, index={"embed": embed, "dims": 0})
    deployer = RotiferStore.for_deployer(memory, "bot", index=INDEX)
    gene(memory).put(("d",), "a", {"text": "apple"})
    assert [i.key for i in deployer.search(("d",), query="apple")] == ["a"]
    deployer.delete(("d",), "a")
    assert memory.deployer("bot").read("langgraph.vectors/d/a") is None


def test_the_whole_value_by_default_as_in_memory_store(memory: MemoryStore) -> None:
    index = {"embed": embed, "dims": DIMS}  # no fields: "$", the value's JSON
    ours, reference = gene(memory, index=index), InMemoryStore(index=index)  # type: ignore[arg-type]
    for store in (ours, reference):
        store.batch([PutOp(("d",), k, {"t": text}) for k, text in DOCS.items()])
    got, want = ours.search(("d",), query="banana"), reference.search(("d",), query="banana")
    assert [(i.key, i.score) for i in got] == [
        (i.key, pytest.approx(i.score, abs=1e-6)) for i in want]
    assert all(i.score is not None for i in got)


def test_vectors_go_with_a_move_and_come_back_by_reindex(tmp_path: Path) -> None:
    from rotifer.memory.transfer import move_agent

    def search(memory: MemoryStore) -> list[tuple[str, bool]]:
        found = gene(memory).search(("docs",), query="apple", limit=5)
        return [(i.key, i.score is not None) for i in found]

    here = MemoryStore.open(tmp_path / "here" / ".rotifer")
    there = MemoryStore.open(tmp_path / "there" / ".rotifer")
    back = MemoryStore.open(tmp_path / "back" / ".rotifer")
    try:
        here.create_agent("bot")
        gene(here).batch([PutOp(("docs",), k, {"text": t}) for k, t in DOCS.items()])
        ranked = search(here)
        assert all(scored for _, scored in ranked)
        move_agent(here, there, "bot", keep_cache=True)  # CACHE kept: the vectors go along
        assert search(there) == ranked
        move_agent(there, back, "bot")  # a plain move leaves CACHE, the vectors, behind
        assert not any(scored for _, scored in search(back))
        assert gene(back).reindex(("docs",)) == len(DOCS)
        assert search(back) == ranked
        assert gene(back).reindex() == 0  # nothing missing any more
        assert verify_agent(back, "bot").ok
    finally:
        for memory in (here, there, back):
            memory.close()
