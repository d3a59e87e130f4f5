"""The deployer's paged listing, usage by category, cleanup order preview and
selection delete (rotifer.memory.views.browse, DeployerMemory.delete_keys), on both
backends, against a plain reference model."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rotifer.memory import AgentMemoryError, Category, ErrorCode, ManualClock, MemoryStore
from rotifer.memory.views.browse import (
    EntryInfo,
    describe_keys,
    expiring_count,
    list_page,
    next_evictions,
    usage_by_category,
)
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import RETAIN_1_DAY, audit_lines, gene_id

A, B = gene_id("a"), gene_id("b")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(store_factory: StoreFactory, clock: ManualClock) -> MemoryStore:
    s = store_factory(clock=clock)
    s.create_agent("ag", quota_bytes=10_000)
    return s


def write(store: MemoryStore, clock: ManualClock, key: str, size: int, cat: str,
          gene: str = A, retention: object = None, agent: str = "ag") -> None:
    clock.advance(seconds=1)
    store.for_gene(agent, gene, "d").write_memory(key, b"x" * size, cat, None, retention)


def walk(store: MemoryStore, agent: str = "ag", **kw: object) -> list[str]:
    """Every page of a listing, following the cursors."""
    keys: list[str] = []
    cursor = None
    for _ in range(1000):
        page = list_page(store, agent, cursor=cursor, **kw)  # type: ignore[arg-type]
        keys += [e.key for e in page.entries]
        cursor = page.cursor
        if cursor is None:
            return keys
    raise AssertionError("the cursor never ended")


def test_pages_newest_first_and_never_a_value(store: MemoryStore, clock: ManualClock) -> None:
    for i in range(7):
        write(store, clock, f"k{i}", i + 1, "CACHE")
    first = list_page(store, "ag", limit=3)
    assert [e.key for e in first.entries] == ["k6", "k5", "k4"]
    assert first.cursor is not None
    assert walk(store, limit=3) == [f"k{i}" for i in reversed(range(7))]
    assert not hasattr(first.entries[0], "value")
    assert first.entries[0].size == len("k6") + 7


def test_sorts_and_filters(store: MemoryStore, clock: ManualClock) -> None:
    write(store, clock, "a/1", 5, "CACHE")
    write(store, clock, "a/2", 50, "PREFERENCE", gene=B)
    write(store, clock, "b/Big", 500, "CONTEXT")
    write(store, clock, "a/3", 1, "CACHE", gene=B)
    assert walk(store, sort="oldest", limit=2) == ["a/1", "a/2", "b/Big", "a/3"]
    assert walk(store, sort="size", limit=2) == ["b/Big", "a/2", "a/1", "a/3"]
    assert walk(store, key_prefix="a/", sort="size") == ["a/2", "a/1", "a/3"]
    assert walk(store, category=Category.CACHE) == ["a/3", "a/1"]
    assert walk(store, creator=B) == ["a/3", "a/2"]
    assert walk(store, contains="BIG") == ["b/Big"]
    assert walk(store, contains="%") == walk(store, contains="_") == []  # not patterns


def test_bad_cursor_or_sort_is_invalid_input(store: MemoryStore) -> None:
    for kw in ({"cursor": "x.y"}, {"cursor": "1", "sort": "newest"}, {"sort": "random"},
               {"limit": 0}, {"cursor": "1.2", "sort": "size"}):
        with pytest.raises(AgentMemoryError) as err:
            list_page(store, "ag", **kw)  # type: ignore[arg-type]
        assert err.value.code is ErrorCode.INVALID_INPUT


def test_usage_marks_and_cleanup_preview(store: MemoryStore, clock: ManualClock) -> None:
    write(store, clock, "p", 10, "PREFERENCE")
    write(store, clock, "p1", 10, "PREFERENCE", retention=RETAIN_1_DAY)
    write(store, clock, "ctx", 20, "CONTEXT")
    write(store, clock, "c1", 30, "CACHE")
    write(store, clock, "c2", 40, "CACHE")
    usage = usage_by_category(store, "ag")
    assert usage[Category.CACHE].count == 2
    assert usage[Category.CACHE].bytes == 2 + 30 + 2 + 40
    assert usage[Category.PATTERN].count == 0
    assert sum(u.bytes for u in usage.values()) == store.usage("ag")[0]
    assert [b.key for b in next_evictions(store, "ag", 3)] == ["c1", "c2", "ctx"]
    assert expiring_count(store, "ag") == 1
    infos = {e.key: e for e in list_page(store, "ag").entries}
    assert infos["p"].unbounded_preference and not infos["p1"].unbounded_preference
    now = clock.now_us()
    assert infos["p1"].expires_within(now) and not infos["c1"].expires_within(now)
    assert infos["p1"].expires_at is not None


def test_next_evictions_are_what_an_over_quota_write_evicts(store: MemoryStore,
                                                            clock: ManualClock) -> None:
    for i in range(5):
        write(store, clock, f"c{i}", 1000, "CACHE")
    write(store, clock, "ctx", 1000, "CONTEXT")
    predicted = [b.key for b in next_evictions(store, "ag", 2)]
    used, quota = store.usage("ag")
    write(store, clock, "new", quota - used + 1000, "PATTERN")  # needs two evictions' room
    evicted = [ln["key"] for ln in audit_lines(store.audit.path.parent)  # type: ignore[union-attr]
               if ln["action"] == "evict"]
    assert evicted == predicted == ["c0", "c1"]


def test_delete_keys_is_one_audited_deployer_change(store: MemoryStore,
                                                    clock: ManualClock) -> None:
    for key in ("x", "y", "z"):
        write(store, clock, key, 3, "CACHE")
    assert sum(e.size for e in describe_keys(store, "ag", ["x", "y", "x", "gone"])) == 8
    assert store.deployer("ag").delete_keys(["x", "y"]) == 2
    lines = [ln for ln in audit_lines(store.audit.path.parent)  # type: ignore[union-attr]
             if ln["action"] == "deployer_delete"]
    assert [(ln["key"], ln["actor"], ln["bytes"]) for ln in lines] == [
        ("x", "deployer", 4), ("y", "deployer", 4)]
    assert len({ln["seq"] for ln in lines}) == 1
    assert walk(store) == ["z"]


def test_delete_keys_is_all_or_nothing(store: MemoryStore, clock: ManualClock) -> None:
    write(store, clock, "x", 3, "CACHE")
    with pytest.raises(AgentMemoryError) as err:
        store.deployer("ag").delete_keys(["x", "gone"])
    assert err.value.code is ErrorCode.NOT_FOUND and "gone" in err.value.message
    assert walk(store) == ["x"]
    with pytest.raises(AgentMemoryError) as err:
        store.deployer("ag").delete_keys([])
    assert err.value.code is ErrorCode.INVALID_INPUT


KEYS = st.text(alphabet="ab/XéÉ", min_size=1, max_size=4)
ENTRIES = st.lists(st.tuples(KEYS, st.sampled_from(list(Category)), st.integers(0, 30),
                             st.sampled_from([A, B])), max_size=25)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=ENTRIES, sort=st.sampled_from(["newest", "oldest", "size"]),
       category=st.none() | st.sampled_from(list(Category)),
       prefix=st.none() | st.sampled_from(["a", "b/", "X"]),
       creator=st.none() | st.just(B), contains=st.none() | st.sampled_from(["x", "/", "é"]),
       limit=st.integers(1, 7))
def test_every_listing_matches_the_model(store: MemoryStore, clock: ManualClock,
                                         entries: list[tuple[str, Category, int, str]],
                                         sort: str, category: Category | None,
                                         prefix: str | None, creator: str | None,
                                         contains: str | None, limit: int) -> None:
    agent = f"m{next(_agents)}"
    store.create_agent(agent, quota_bytes=1_000_000)
    model: dict[str, tuple[Category, int, str, int]] = {}
    for n, (key, cat, size, gene) in enumerate(entries):
        old = model.get(key)  # both genes are of domain "d": either may update
        write(store, clock, key, size, cat, gene, agent=agent)
        model[key] = (cat, len(key.encode()) + size, old[2] if old else gene, n)
    rows = [(k, *v) for k, v in model.items()
            if (category is None or v[0] is category) and (not prefix or k.startswith(prefix))
            and (creator is None or v[2] == creator)
            and (contains is None or lower(contains) in lower(k))]
    if sort == "newest":
        rows.sort(key=lambda r: -r[4])
    elif sort == "oldest":
        rows.sort(key=lambda r: r[4])
    else:
        rows.sort(key=lambda r: (-r[2], r[0]))
    got = walk(store, agent, sort=sort, category=category, key_prefix=prefix,
               creator=creator, contains=contains, limit=limit)
    assert got == [r[0] for r in rows]


_agents = itertools.count()


def lower(text: str) -> str:
    """What the listing's key search folds: ASCII letters only."""
    return "".join(c.lower() if c.isascii() else c for c in text)


def test_entry_info_has_no_value_field() -> None:
    assert "value" not in EntryInfo.__slots__  # type: ignore[attr-defined]
