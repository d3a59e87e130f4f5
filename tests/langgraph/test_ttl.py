"""LangGraph's ttl where it equals rotifer's retention -- whole days, reads
not refreshing -- and a clear refusal of the rest, nothing written (issue 32),
on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langgraph.store.base import PutOp

from rotifer.langgraph import RotiferStore
from rotifer.memory import ManualClock, MemoryStore
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import gene_id

GENE = gene_id("ttl")
DAY = 1440
NO_REFRESH = {"refresh_on_read": False}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-03-01T12:00:00Z")


@pytest.fixture
def memory(store_factory: StoreFactory, tmp_path: Path, clock: ManualClock) -> MemoryStore:
    store = store_factory(tmp_path / ".rotifer", clock=clock)
    store.create_agent("bot")
    return store


def gene(memory: MemoryStore, **options: object) -> RotiferStore:
    return RotiferStore.for_gene(memory, "bot", GENE, "graphs", **options)  # type: ignore[arg-type]


def test_whole_days_without_refresh_are_retention(memory: MemoryStore, clock: ManualClock
                                                  ) -> None:
    store = gene(memory, ttl=NO_REFRESH)
    store.put(("a",), "two", {"v": 1}, ttl=2 * DAY)
    store.put(("a",), "kept", {"v": 1})
    entry = memory.deployer("bot").read("langgraph/a/two")
    assert entry is not None and entry.retention_policy is not None
    assert entry.retention_policy.max_retention_days == 2
    clock.advance(days=1.5)
    assert store.get(("a",), "two") is not None  # read: not extended
    clock.advance(days=0.6)
    assert store.get(("a",), "two") is None
    assert store.get(("a",), "kept") is not None
    defaulted = gene(memory, ttl={**NO_REFRESH, "default_ttl": DAY, "sweep_interval_minutes": 5})
    asyncio.run(defaulted.aput(("b",), "one", {"v": 1}))
    defaulted.put(("b",), "none", {"v": 1}, ttl=None)
    clock.advance(days=1, seconds=1)
    assert defaulted.get(("b",), "one") is None and defaulted.get(("b",), "none") is not None


def test_the_rest_is_refused_and_nothing_written(memory: MemoryStore) -> None:
    plain = gene(memory)
    with pytest.raises(NotImplementedError, match="refresh_on_read"):
        plain.put(("a",), "k", {"v": 1}, ttl=DAY)
    for config in ({}, {"refresh_on_read": True}, {**NO_REFRESH, "default_ttl": 90}):
        with pytest.raises(NotImplementedError, match=r"whole days|refresh_on_read"):
            gene(memory, ttl=config)
    store = gene(memory, ttl=NO_REFRESH)
    for minutes in (90, 1.5 * DAY, -DAY, 0):
        with pytest.raises(NotImplementedError, match="not a whole number of days"):
            store.put(("a",), "k", {"v": 1}, ttl=minutes)
    with pytest.raises(NotImplementedError, match="not a whole number of days"):
        store.batch([PutOp(("a",), "ok", {"v": 1}), PutOp(("a",), "k", {"v": 1}, ttl=60)])
    with pytest.raises(NotImplementedError, match="refresh_ttl"):
        store.get(("a",), "k", refresh_ttl=True)
    assert memory.deployer("bot").list() == []
