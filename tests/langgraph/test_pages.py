"""A page costs a page (issue 32): ``search`` hands the memory the namespace as
a key prefix and ``offset + limit`` as the count, so it looks at no more
entries than the page needs; a filter reads on only until the page is full;
values too big for one 4 MiB query still come back in one page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from langgraph.store.base import PutOp

from rotifer.langgraph import RotiferStore
from rotifer.langgraph.callers import GeneCaller
from rotifer.memory import MemoryEntry, MemoryStore
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import gene_id

T = TypeVar("T")
GENE = gene_id("lg-pages")


class CountingCaller(GeneCaller):
    """The gene's real caller, counting the entries the memory hands the store."""

    looked_at = 0

    def pick(self, key_prefix: str, pick: Callable[[MemoryEntry], T | None],
             count: int | None) -> list[T]:
        def counted(entry: MemoryEntry) -> T | None:
            self.looked_at += 1
            return pick(entry)
        return super().pick(key_prefix, counted, count)


def _store(store_factory: StoreFactory, tmp_path: Path) -> tuple[RotiferStore, CountingCaller]:
    memory: MemoryStore = store_factory(tmp_path / ".rotifer")
    memory.create_agent("bot", quota_bytes=64 * 1024 * 1024)
    caller = CountingCaller(memory.for_gene("bot", GENE, "graphs"))
    return RotiferStore(caller), caller


def test_search_looks_at_its_page_only(store_factory: StoreFactory, tmp_path: Path) -> None:
    store, caller = _store(store_factory, tmp_path)
    store.batch([PutOp(("other",), f"k{n}", {"n": n}) for n in range(50)])
    store.batch([PutOp(("docs",), f"k{n:03d}", {"n": n, "even": n % 2 == 0})
                 for n in range(300)])
    caller.looked_at = 0
    assert [i.key for i in store.search(("docs",), limit=10)] == \
        [f"k{n:03d}" for n in range(299, 289, -1)]
    assert caller.looked_at == 10
    caller.looked_at = 0
    assert [i.key for i in store.search(("docs",), limit=10, offset=250)] == \
        [f"k{n:03d}" for n in range(49, 39, -1)]
    assert caller.looked_at == 260
    caller.looked_at = 0
    found = store.search(("docs",), filter={"even": False}, limit=5)
    assert [i.value["n"] for i in found] == [299, 297, 295, 293, 291]
    assert caller.looked_at == 9  # read on only until the fifth match
    caller.looked_at = 0
    assert store.search(("other",), limit=0) == []
    assert caller.looked_at == 0


def test_a_page_over_4_mib_is_one_page(store_factory: StoreFactory, tmp_path: Path) -> None:
    store, caller = _store(store_factory, tmp_path)
    for i in range(6):  # 900 KiB each: six are over what one query may return
        store.put(("big",), f"b{i}", {"blob": "x" * (900 * 1024)})
    caller.looked_at = 0
    assert [i.key for i in store.search(("big",), limit=6)] == [f"b{i}" for i in range(5, -1, -1)]
    assert caller.looked_at == 6
