"""The small gaps of issue 32: dotted filter keys answer as SqliteStore's."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import PutOp
from langgraph.store.sqlite import SqliteStore

from rotifer.langgraph import RotiferStore
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import gene_id

VALUES: list[dict[str, Any]] = [
    {"user": {"level": 3, "name": "ann", "tags": {"vip": True}}},
    {"user": {"level": 7, "name": "bob"}},
    {"user": "flat"},
    {"user.level": 3},  # a literal dotted key: a path reads nested objects only
    {"other": 1},
]
FILTERS: list[dict[str, Any]] = [
    {"user.level": 3}, {"user.level": {"$gt": 4}}, {"user.name": "bob"},
    {"user.tags.vip": True}, {"user.level": {"$lte": 7}, "user.name": {"$ne": "bob"}},
    {"user.missing": {"$gt": 0}},
]


@pytest.mark.parametrize("filter", FILTERS, ids=[str(f) for f in FILTERS])
def test_dotted_keys_match_as_sqlite_store(store_factory: StoreFactory, tmp_path: Path,
                                           filter: dict[str, Any]) -> None:
    memory = store_factory(tmp_path / ".rotifer")
    memory.create_agent("bot")
    ours = RotiferStore.for_gene(memory, "bot", gene_id("gaps"), "graphs")
    lite = SqliteStore(sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None))
    lite.setup()
    for store in (ours, lite):
        store.batch([PutOp(("v",), f"k{n}", value) for n, value in enumerate(VALUES)])
    got = sorted(i.key for i in ours.search(("v",), filter=filter, limit=50))
    assert got == sorted(i.key for i in lite.search(("v",), filter=filter, limit=50))
