"""Rotifer's rules hold through the LangGraph store, on SQLite and PostgreSQL:
scopes, quota and cleanup order, retention, the audit log, and the refusals
docs/langgraph.md lists."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp

from rotifer.langgraph import NamespacePolicy, RotiferStore
from rotifer.memory import AgentMemoryError, ErrorCode, ManualClock, MemoryStore
from rotifer.memory.audit.verify import verify_agent
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import RETAIN_1_DAY, actions, audit_lines, gene_id

GENE_A, GENE_B = gene_id("lg-a"), gene_id("lg-b")
PRIVATE = {"category": "PREFERENCE", "accessPolicy": {
    "readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
    "sharePolicy": "PRIVATE"}}


@pytest.fixture
def rot(tmp_path: Path) -> Path:
    return tmp_path / ".rotifer"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-03-01T12:00:00Z")


@pytest.fixture
def memory(store_factory: StoreFactory, rot: Path, clock: ManualClock) -> MemoryStore:
    store = store_factory(rot, clock=clock)
    store.create_agent("bot")
    return store


def gene(memory: MemoryStore, gene_id: str = GENE_A, domain: str = "graphs",
         **options: object) -> RotiferStore:
    return RotiferStore.for_gene(memory, "bot", gene_id, domain, **options)  # type: ignore[arg-type]


def code(excinfo: pytest.ExceptionInfo[AgentMemoryError]) -> ErrorCode:
    return excinfo.value.code


def test_a_second_gene_is_refused_a_creator_gene_only_item(memory: MemoryStore, rot: Path
                                                           ) -> None:
    settings = {"namespaces": {("private",): PRIVATE}}
    gene(memory, **settings).put(("private", "u1"), "card", {"pin": 1234})
    gene(memory, **settings).put(("shared", "u1"), "theme", {"dark": True})
    other = gene(memory, GENE_B, **settings)  # same domain, another gene
    with pytest.raises(AgentMemoryError) as denied:
        other.get(("private", "u1"), "card")  # refused, never "missing"
    assert code(denied) is ErrorCode.ACCESS_DENIED
    # search and list_namespaces leave it out; the SAME_DOMAIN item is there
    assert [i.key for i in other.search(())] == ["theme"]
    assert other.list_namespaces() == [("shared", "u1")]
    for attempt in (lambda: other.put(("private", "u1"), "card", {"pin": 0}),
                    lambda: other.delete(("private", "u1"), "card")):
        with pytest.raises(AgentMemoryError) as denied:
            attempt()
        assert code(denied) is ErrorCode.ACCESS_DENIED
    # The protection bites: under the default policy the same gene reads it.
    assert other.get(("shared", "u1"), "theme") is not None
    assert gene(memory).get(("private", "u1"), "card").value == {"pin": 1234}  # type: ignore[union-attr]
    refused = [line for line in audit_lines(rot) if line["action"] == "access_denied"]
    assert [(r["operation"], r["actor"]) for r in refused] == [
        ("read", GENE_B), ("write", GENE_B), ("delete", GENE_B)]


def test_a_full_quota_evicts_cache_first(store_factory: StoreFactory, rot: Path) -> None:
    memory = store_factory(rot)
    memory.create_agent("bot", quota_bytes=600)
    store = gene(memory, namespaces={("cache",): "CACHE", ("prefs",): "PREFERENCE"},
                 default="PATTERN")
    blob = {"text": "x" * 100}
    store.put(("cache",), "c1", blob)
    store.put(("notes",), "p1", blob)  # PATTERN (the default given)
    store.put(("cache",), "c2", blob)
    store.put(("prefs",), "u1", blob)
    store.put(("prefs",), "u2", blob)  # needs room: the oldest CACHE goes, then the next
    assert store.get(("cache",), "c1") is None
    assert store.get(("notes",), "p1") is not None
    assert [a for a in actions(rot) if a[0] == "evict"] == [("evict", "langgraph/cache/c1")]
    store.put(("prefs",), "u3", blob)
    store.put(("prefs",), "u4", blob)
    assert store.search(("cache",)) == [] and store.search(("notes",)) == []
    with pytest.raises(AgentMemoryError) as full:  # only PREFERENCE left: never evicted
        store.put(("prefs",), "u5", {"text": "x" * 300})
    assert code(full) is ErrorCode.QUOTA_EXCEEDED
    assert store.get(("prefs",), "u5") is None
    assert {i.key for i in store.search(("prefs",))} == {"u1", "u2", "u3", "u4"}


def test_an_expired_item_is_gone(memory: MemoryStore, rot: Path, clock: ManualClock) -> None:
    store = gene(memory, namespaces={("scratch",): NamespacePolicy(retention=None),
                                     ("day",): {"retentionPolicy": RETAIN_1_DAY}})
    store.put(("day", "u1"), "k", {"v": 1})
    store.put(("scratch",), "k", {"v": 2})
    clock.advance(days=1, seconds=-1)
    assert store.get(("day", "u1"), "k") is not None  # a read does not extend it
    clock.advance(seconds=1)
    assert store.get(("day", "u1"), "k") is None
    assert [i.namespace for i in store.search(())] == [("scratch",)]
    assert store.list_namespaces() == [("scratch",)]
    assert ("expire", "langgraph/day/u1/k") in actions(rot)
    assert verify_agent(memory, "bot").ok


def test_every_put_and_delete_is_an_audit_line_verify_accepts(memory: MemoryStore, rot: Path
                                                              ) -> None:
    store = gene(memory)
    store.put(("a",), "k1", {"v": 1})
    store.put(("a",), "k1", {"v": 2})
    store.batch([PutOp(("b", "c"), "k2", {"v": 3}), PutOp(("a",), "k1", None)])
    store.delete(("a",), "never-written")  # nothing there: nothing to log, no error
    asyncio.run(store.aput(("b",), "k3", {"v": 4}))
    asyncio.run(store.adelete(("b",), "k3"))
    assert actions(rot) == [("write", "langgraph/a/k1"), ("update", "langgraph/a/k1"),
                            ("write", "langgraph/b/c/k2"), ("delete", "langgraph/a/k1"),
                            ("write", "langgraph/b/k3"), ("delete", "langgraph/b/k3")]
    assert all(line["actor"] == GENE_A for line in audit_lines(rot))
    report = verify_agent(memory, "bot")
    assert report.ok, report.message
    assert report.changes == 6


def test_the_deployer_reads_and_deletes_anything_and_puts_nothing(memory: MemoryStore,
                                                                   rot: Path) -> None:
    gene(memory, namespaces={("private",): PRIVATE}).put(("private",), "card", {"pin": 1})
    owner = RotiferStore.for_deployer(memory, "bot")
    assert owner.get(("private",), "card").value == {"pin": 1}  # type: ignore[union-attr]
    assert [i.key for i in owner.search(("private",))] == ["card"]
    with pytest.raises(AgentMemoryError) as refused:
        owner.put(("private",), "new", {"x": 1})
    assert code(refused) is ErrorCode.ACCESS_DENIED
    owner.delete(("private",), "card")
    assert owner.get(("private",), "card") is None
    assert actions(rot)[-2:] == [("access_denied", "langgraph/private/new"),
                                 ("deployer_delete", "langgraph/private/card")]
    assert verify_agent(memory, "bot").ok


def test_refusals_write_nothing(memory: MemoryStore, rot: Path) -> None:
    store = gene(memory)
    with pytest.raises(NotImplementedError, match="retention policy"):
        store.put(("a",), "k", {"v": 1}, ttl=5)
    with pytest.raises(NotImplementedError, match="retention policy"):
        asyncio.run(store.aput(("a",), "k", {"v": 1}, ttl=5))
    with pytest.raises(NotImplementedError, match="retention policy"):
        store.batch([PutOp(("a",), "ok", {"v": 1}), PutOp(("a",), "k", {"v": 1}, ttl=1.0)])
    # Without an index a query is ignored, as SqliteStore and PostgresStore ignore it.
    assert store.search(("a",), query="what does the user like?") == []
    with pytest.raises(AgentMemoryError) as long_key:
        store.put(("a",), "k" * 1100, {"v": 1})
    assert code(long_key) is ErrorCode.INVALID_INPUT
    with pytest.raises(AgentMemoryError) as long_key:
        store.get(("a",), "k" * 1100)
    assert code(long_key) is ErrorCode.INVALID_INPUT
    with pytest.raises(AgentMemoryError) as not_json:
        store.put(("a",), "k", {"v": float("nan")})
    assert code(not_json) is ErrorCode.INVALID_INPUT
    with pytest.raises(AgentMemoryError) as too_big:
        store.put(("a",), "k", {"v": "x" * (1024 * 1024)})
    assert code(too_big) is ErrorCode.INVALID_INPUT
    for namespace in (("a.b",), ()):
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(namespace, "k", {"v": 1})])
    with pytest.raises(InvalidNamespaceError):  # put refuses the root label, batch does not
        store.put(("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(ValueError, match="Unsupported operator"):
        store.search(("a",), filter={"v": {"$in": [1]}})
    assert actions(rot) == [] and store.search(()) == []


def test_items_a_gene_wrote_under_the_root_are_left_alone(memory: MemoryStore) -> None:
    raw = memory.for_gene("bot", GENE_A, "graphs")
    raw.write_memory("langgraph/notes/raw", b"not json", "CACHE")
    raw.write_memory("langgraph/notes/list", b"[1, 2]", "CACHE")
    raw.write_memory("langgraph/bad%zz/k", b"{}", "CACHE")
    raw.write_memory("formatter/indent", b"4", "PREFERENCE")
    store = gene(memory)
    store.put(("notes",), "real", {"v": 1})
    assert [i.key for i in store.search(())] == ["real"]
    assert store.list_namespaces() == [("notes",)]
    assert store.get(("notes",), "raw") is None


def test_search_pages_past_1000_entries_and_4_mib(store_factory: StoreFactory, rot: Path,
                                                  backend: str) -> None:
    if backend != "sqlite":
        pytest.skip("paging is the same code on both backends; SQLite is cheaper")
    memory = store_factory(rot)
    memory.create_agent("bot", quota_bytes=64 * 1024 * 1024)
    store = gene(memory)
    big = {"blob": "x" * (700 * 1024)}
    for i in range(8):  # 5.6 MiB: more than one query may return
        store.put(("big",), f"b{i}", big)
    assert [i.key for i in store.search(("big",), limit=20)] == [f"b{i}" for i in range(7, -1, -1)]
    assert len(store.search(("big",), offset=6, limit=5)) == 2
    for start in range(0, 1100, 100):
        store.batch([PutOp(("many",), f"k{n:04d}", {"n": n}) for n in range(start, start + 100)])
    newest_first = [f"k{n:04d}" for n in range(1099, -1, -1)]
    assert [i.key for i in store.search(("many",), offset=990, limit=30)] == newest_first[990:1020]
    assert [i.key for i in store.search(("many",), filter={"n": {"$lt": 5}}, limit=10)] == \
        newest_first[-5:]
    assert len(store.list_namespaces()) == 2


def test_a_batch_reads_first_then_puts_in_first_put_order(memory: MemoryStore) -> None:
    store = gene(memory)
    store.put(("a",), "x", {"v": 0})
    got = store.batch([PutOp(("a",), "x", {"v": 1}), PutOp(("a",), "y", {"v": 2}),
                       PutOp(("a",), "x", {"v": 3}), GetOp(("a",), "x")])
    assert got[3] is not None and got[3].value == {"v": 0}  # read before the puts
    # x then y (each key at its first put's place, its last value): y is newest
    assert [(i.key, i.value) for i in store.search(("a",))] == [("y", {"v": 2}), ("x", {"v": 3})]


def test_concurrent_async_puts_all_land_and_verify(memory: MemoryStore) -> None:
    store = gene(memory)

    async def many() -> None:
        await asyncio.gather(*(store.aput(("n", str(i % 3)), f"k{i}", {"i": i})
                               for i in range(24)))

    asyncio.run(many())
    found = asyncio.run(store.asearch(("n",), limit=100))
    assert sorted(item.value["i"] for item in found) == list(range(24))
    assert asyncio.run(store.alist_namespaces()) == [("n", "0"), ("n", "1"), ("n", "2")]
    assert verify_agent(memory, "bot").ok


def test_batch_takes_the_langgraph_root_label_as_langgraphs_stores_do(memory: MemoryStore
                                                                      ) -> None:
    from langgraph.store.memory import InMemoryStore

    for store in (gene(memory), InMemoryStore()):
        store.batch([PutOp(("langgraph", "x"), "k", {"v": 1})])
        item = store.get(("langgraph", "x"), "k")
        assert item is not None and item.value == {"v": 1}
        assert store.list_namespaces() == [("langgraph", "x")]
    assert memory.deployer("bot").read("langgraph/langgraph/x/k") is not None
