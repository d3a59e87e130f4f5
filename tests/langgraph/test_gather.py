"""Concurrent async calls gathered per event-loop tick (issue 32): one batch
(reads first, each put its own audited change in order), each caller its own
results or its own error -- on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import Op, Result

from rotifer.langgraph import RotiferStore
from rotifer.langgraph.store import Failed
from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore
from tests.audit_reading import audit_lines
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import gene_id

GENE_A, GENE_B = gene_id("gather-a"), gene_id("gather-b")
PRIVATE = {"category": "CONTEXT", "accessPolicy": {
    "readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
    "sharePolicy": "PRIVATE"}}


class CountingStore(RotiferStore):
    """The real store, counting the batches it runs for async callers."""

    runs: list[int]

    def _run_each(self, todo: list[Op], embedded: dict[str, list[float]],
                  documents: list[list[float]], contexts: list[dict[str, str] | None]
                  ) -> list[Result | Failed]:
        self.runs.append(len(todo))
        return super()._run_each(todo, embedded, documents, contexts)


@pytest.fixture
def rot(tmp_path: Path) -> Path:
    return tmp_path / ".rotifer"


@pytest.fixture
def memory(store_factory: StoreFactory, rot: Path) -> MemoryStore:
    store = store_factory(rot)
    store.create_agent("bot")
    return store


def counting(memory: MemoryStore, gene: str = GENE_A, **options: Any) -> CountingStore:
    store = CountingStore.for_gene(memory, "bot", gene, "graphs", **options)
    assert isinstance(store, CountingStore)
    store.runs = []
    return store


def test_one_tick_is_one_batch_reads_first_puts_in_order(memory: MemoryStore, rot: Path
                                                         ) -> None:
    store = counting(memory)

    async def tick() -> list[Any]:
        return list(await asyncio.gather(
            store.aput(("n",), "a", {"v": 1}), store.aget(("n",), "a"),
            store.aput(("n",), "b", {"v": 2}), store.asearch(("n",)),
            store.aput(("n",), "c", {"v": 3}), store.aget(("n",), "a")))

    got = asyncio.run(tick())
    assert store.runs == [6]  # six calls, one batch
    assert got[1] is None and got[3] == [] and got[5] is None  # read before the puts
    writes = [line["key"] for line in audit_lines(rot) if line["action"] == "write"]
    assert writes == ["langgraph/n/a", "langgraph/n/b", "langgraph/n/c"]  # one line each
    later = asyncio.run(store.asearch(("n",)))
    assert [i.key for i in later] == ["c", "b", "a"]
    assert store.runs == [6, 1]


def test_each_caller_gets_its_own_error(memory: MemoryStore) -> None:
    RotiferStore.for_gene(memory, "bot", GENE_A, "graphs", namespaces={("p",): PRIVATE}).put(
        ("p",), "secret", {"v": 0})
    store = counting(memory, GENE_B)

    async def tick() -> list[Any]:
        return list(await asyncio.gather(
            store.aget(("p",), "secret"), store.aput(("q",), "k", {"v": 1}),
            store.aput(("q",), "t", {"v": 1}, ttl=5), store.aput(("p",), "secret", {"v": 9}),
            store.alist_namespaces(), return_exceptions=True))

    denied_get, put, ttl, denied_put, spaces = asyncio.run(tick())
    assert store.runs == [4]  # the ttl put was refused before the batch, alone
    assert isinstance(denied_get, AgentMemoryError) and denied_get.code is ErrorCode.ACCESS_DENIED
    assert isinstance(denied_put, AgentMemoryError) and denied_put.code is ErrorCode.ACCESS_DENIED
    assert isinstance(ttl, NotImplementedError)
    assert put is None and spaces == []  # (read before the put)
    assert asyncio.run(store.aget(("q",), "k")) is not None


def test_one_embedding_call_for_a_tick(memory: MemoryStore) -> None:
    calls: list[int] = []

    async def aembed(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        return [[float(len(t)), 1.0] for t in texts]

    store = counting(memory, index={"embed": aembed, "dims": 2, "fields": ["t"]})

    async def tick() -> None:
        await asyncio.gather(*(store.aput(("d",), f"k{i}", {"t": "x" * i}) for i in range(1, 6)))

    asyncio.run(tick())
    assert calls == [5] and store.runs == [5]
    found = asyncio.run(store.asearch(("d",), query="xxxxx", limit=1))
    assert [i.key for i in found] == ["k5"]


def test_gathered_gets_and_deletes_read_and_change_together(memory: MemoryStore) -> None:
    """Many gets are read in one go and many deletes looked up in one go
    (rotifer.memory.views.many); each caller still gets what its call alone gets:
    the item, None, its own refusal; a delete of nothing is no error."""
    owner = RotiferStore.for_gene(memory, "bot", GENE_A, "graphs",
                                  namespaces={("p",): PRIVATE})
    for i in range(5):
        owner.put(("n",), f"k{i}", {"v": i})
    owner.put(("p",), "secret", {"v": 0})
    store = counting(memory, GENE_B)

    async def tick() -> list[Any]:
        return list(await asyncio.gather(
            *(store.aget(("n",), f"k{i}") for i in range(7)), store.aget(("p",), "secret"),
            store.adelete(("n",), "k0"), store.adelete(("n",), "gone"),
            store.adelete(("p",), "secret"), return_exceptions=True))

    got = asyncio.run(tick())
    assert store.runs == [11]
    assert [None if g is None else g.value["v"] for g in got[:7]] == [0, 1, 2, 3, 4, None, None]
    assert isinstance(got[7], AgentMemoryError) and got[7].code is ErrorCode.ACCESS_DENIED
    assert got[8] is None and got[9] is None
    assert isinstance(got[10], AgentMemoryError) and got[10].code is ErrorCode.ACCESS_DENIED
    assert store.get(("n",), "k0") is None and owner.get(("p",), "secret") is not None
    deployer = RotiferStore.for_deployer(memory, "bot")

    async def owner_tick() -> list[Any]:
        return list(await asyncio.gather(
            deployer.aget(("p",), "secret"), deployer.adelete(("n",), "k1"),
            deployer.adelete(("n",), "gone"), deployer.aput(("n",), "x", {"v": 1}),
            return_exceptions=True))

    secret, deleted, nothing, refused = asyncio.run(owner_tick())
    assert secret is not None and secret.value == {"v": 0}
    assert deleted is None and nothing is None
    assert isinstance(refused, AgentMemoryError) and refused.code is ErrorCode.ACCESS_DENIED
    assert store.get(("n",), "k1") is None


def test_gathered_puts_write_and_drop_their_vectors(memory: MemoryStore) -> None:
    store = counting(memory, index={"embed": lambda texts: [[float(len(t)), 1.0]
                                                             for t in texts],
                                    "dims": 2, "fields": ["t"]})

    async def puts() -> None:
        await asyncio.gather(*(store.aput(("d",), f"k{i}", {"t": "x" * i}) for i in range(1, 4)),
                             store.aput(("d",), "bare", {"t": "y"}, index=False))

    asyncio.run(puts())
    cached = [e.key for e in memory.deployer("bot").pick("", lambda e: e, None)
              if e.category.value == "CACHE"]
    assert len(cached) == 3  # one vector entry per indexed item, none for "bare"
    found = asyncio.run(store.asearch(("d",), query="xxx", limit=1))
    assert [i.key for i in found] == ["k3"] and found[0].score is not None

    async def deletes() -> None:
        await asyncio.gather(*(store.adelete(("d",), f"k{i}") for i in range(1, 4)))

    asyncio.run(deletes())
    assert [e for e in memory.deployer("bot").pick("", lambda e: e, None)
            if e.category.value == "CACHE"] == []
