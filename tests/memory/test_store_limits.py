"""Quota, cleanup order, size limits and input validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from rotifer.memory import (
    Category,
    ErrorCode,
    GeneMemory,
    ManualClock,
    MemoryStore,
    parse_size,
)

from .helpers import actions, code_of, gene_id

A, B = gene_id("a"), gene_id("b")


@pytest.fixture
def store(empty_store: MemoryStore) -> MemoryStore:
    """No agent yet: each test creates the agents it needs."""
    return empty_store


def small(store: MemoryStore, quota: int = 100, gid: str = A) -> GeneMemory:
    store.create_agent("small", quota_bytes=quota)
    return store.for_gene("small", gid, "d")


def keys(g: GeneMemory) -> list[str]:
    return sorted(e.key for e in g.query_memory({"limit": 1000}))


# -- quota and cleanup ---------------------------------------------------------

def test_quota_counts_utf8_bytes_of_keys_and_values(store: MemoryStore) -> None:
    g = small(store, 1000)
    g.write_memory("ключ", "значение".encode(), "PREFERENCE")
    assert store.usage("small") == (len("ключ".encode()) + len("значение".encode()), 1000)


def test_cleanup_order_cache_pattern_context_oldest_first(store: MemoryStore,
                                                          clock: ManualClock, rot: Path) -> None:
    g = small(store, 100)
    # Each entry is 2 + 18 = 20 bytes; write them oldest first, categories interleaved.
    for key, cat in [("x1", "CONTEXT"), ("p1", "PATTERN"), ("c1", "CACHE"), ("p2", "PATTERN"),
                     ("c2", "CACHE")]:
        g.write_memory(key, b"v" * 18, cat)
        clock.advance(seconds=1)
    assert store.usage("small")[0] == 100
    g.write_memory("n1", b"v" * 18, "PREFERENCE")   # evicts c1 (oldest CACHE)
    g.write_memory("n2", b"v" * 38, "PREFERENCE")   # needs 40: c2, then p1
    assert keys(g) == ["n1", "n2", "p2", "x1"]
    g.write_memory("n3", b"v" * 38, "PREFERENCE")   # p2, then x1
    assert keys(g) == ["n1", "n2", "n3"]
    evicted = [k for a, k in actions(rot) if a == "evict"]
    assert evicted == ["c1", "c2", "p1", "p2", "x1"]
    assert store.usage("small")[0] == 100


def test_recently_rewritten_entry_counts_as_new(store: MemoryStore, clock: ManualClock) -> None:
    g = small(store, 60)
    g.write_memory("c1", b"v" * 18, "CACHE")
    clock.advance(seconds=1)
    g.write_memory("c2", b"v" * 18, "CACHE")
    clock.advance(seconds=1)
    g.write_memory("c1", b"w" * 18, "CACHE")   # c1 is now the newest
    clock.advance(seconds=1)
    g.write_memory("c3", b"v" * 38, "CACHE")   # needs 20 more: c2 goes, not c1
    assert keys(g) == ["c1", "c3"]


def test_same_timestamp_evicts_in_write_order(store: MemoryStore) -> None:
    g = small(store, 60)
    for key in ("c1", "c2", "c3"):
        g.write_memory(key, b"v" * 18, "CACHE")   # the clock does not move
    g.write_memory("c4", b"v" * 18, "CACHE")
    assert keys(g) == ["c2", "c3", "c4"]


def test_preference_never_evicted_and_nothing_written(store: MemoryStore, rot: Path) -> None:
    g = small(store, 60)
    g.write_memory("p1", b"v" * 38, "PREFERENCE")
    g.write_memory("c1", b"v" * 8, "CACHE")
    before = (keys(g), store.usage("small"))
    assert code_of(lambda: g.write_memory("p2", b"v" * 28, "PREFERENCE")
                   ) is ErrorCode.QUOTA_EXCEEDED
    # The cache entry that could have been evicted is still there: nothing evicted.
    assert (keys(g), store.usage("small")) == before
    assert actions(rot)[-1] == ("quota_exceeded", "p2")
    assert [a for a, _ in actions(rot)].count("evict") == 0


def test_rewrite_frees_its_own_bytes_and_is_not_evicted(store: MemoryStore) -> None:
    g = small(store, 40)
    g.write_memory("c1", b"v" * 38, "CACHE")
    g.write_memory("c1", b"w" * 38, "CACHE")   # exactly fits once its old bytes are freed
    assert g.read_memory("c1").value == b"w" * 38  # type: ignore[union-attr]
    assert code_of(lambda: g.write_memory("c1", b"w" * 39, "CACHE")) is ErrorCode.QUOTA_EXCEEDED
    assert g.read_memory("c1").value == b"w" * 38  # type: ignore[union-attr]


def test_cleanup_ignores_who_wrote_the_entry(store: MemoryStore) -> None:
    store.create_agent("shared", quota_bytes=40)
    a = store.for_gene("shared", A, "one")
    b = store.for_gene("shared", B, "two")
    a.write_memory("a/c", b"v" * 17, "CACHE", {"readScope": "CREATOR_GENE_ONLY",
                                              "writeScope": "CREATOR_GENE_ONLY",
                                              "sharePolicy": "PRIVATE"})
    b.write_memory("b/p", b"v" * 36, "PREFERENCE")
    assert a.read_memory("a/c") is None


@pytest.mark.parametrize(("text", "expected"), [
    ("50MB", 50 * 1024**2), ("512kb", 512 * 1024), ("1.5GB", int(1.5 * 1024**3)),
    ("1024GB", 1024**4), ("1 KB", 1024), ("0.5kb", 512),
])
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["50", "0MB", "-1MB", "1025GB", "abc", "", "10TB", "MB",
                                  "1e3MB", "0.0000001KB"])
def test_parse_size_refuses(text: str) -> None:
    assert code_of(lambda: parse_size(text)) is ErrorCode.INVALID_INPUT


# -- size limits and validation ------------------------------------------------

@pytest.fixture
def g(store: MemoryStore) -> GeneMemory:
    store.create_agent("big", quota_bytes=64 * 1024 * 1024)
    return store.for_gene("big", A, "d")


def test_value_size_limit(g: GeneMemory, rot: Path) -> None:
    g.write_memory("k", b"v" * (1024 * 1024), "CACHE")
    assert code_of(lambda: g.write_memory("k2", b"v" * (1024 * 1024 + 1), "CACHE")
                   ) is ErrorCode.INVALID_INPUT
    assert g.read_memory("k2") is None
    assert actions(rot) == [("write", "k")]  # invalid input is not a change


@pytest.mark.parametrize("key", ["", "a\x00b", "k" * 1025, "é" * 513, "\ud800", 5, None, b"k"])
def test_bad_keys(g: GeneMemory, key: object) -> None:
    for call in [lambda: g.write_memory(key, b"v", "CACHE"),  # type: ignore[arg-type]
                 lambda: g.read_memory(key),  # type: ignore[arg-type]
                 lambda: g.delete_memory(key)]:  # type: ignore[arg-type]
        assert code_of(call) is ErrorCode.INVALID_INPUT


def test_key_of_1024_bytes_is_fine(g: GeneMemory) -> None:
    g.write_memory("k" * 1024, b"v", "CACHE")
    g.write_memory("é" * 512, b"v", "CACHE")
    assert len(g.query_memory()) == 2


@pytest.mark.parametrize("value", ["text", 5, None, [1, 2]])
def test_value_must_be_bytes(g: GeneMemory, value: object) -> None:
    assert code_of(lambda: g.write_memory("k", value, "CACHE")  # type: ignore[arg-type]
                   ) is ErrorCode.INVALID_INPUT


def test_bytearray_and_memoryview_are_bytes(g: GeneMemory) -> None:
    assert g.write_memory("k", bytearray(b"ab"), "CACHE").value == b"ab"
    assert g.write_memory("k", memoryview(b"cd"), "CACHE").value == b"cd"


@pytest.mark.parametrize("category", ["cache", "Cache", "BOGUS", "", None, 1])
def test_unknown_category(g: GeneMemory, category: object) -> None:
    assert code_of(lambda: g.write_memory("k", b"v", category)  # type: ignore[arg-type]
                   ) is ErrorCode.INVALID_INPUT
    if category is not None:
        assert code_of(lambda: g.read_memory("k", category)  # type: ignore[arg-type]
                       ) is ErrorCode.INVALID_INPUT


@pytest.mark.parametrize("pol", [
    {"readScope": "EVERYONE", "writeScope": "SAME_DOMAIN", "sharePolicy": "PRIVATE"},
    {"readScope": "SAME_DOMAIN", "writeScope": "same_domain", "sharePolicy": "PRIVATE"},
    {"readScope": "SAME_DOMAIN", "writeScope": "SAME_DOMAIN", "sharePolicy": "PUBLIC"},
    {"readScope": "SAME_DOMAIN", "writeScope": "SAME_DOMAIN"},
    {"readScope": "SAME_DOMAIN", "writeScope": "SAME_DOMAIN", "sharePolicy": "PRIVATE", "x": 1},
    "SAME_DOMAIN",
])
def test_bad_access_policy(g: GeneMemory, pol: object) -> None:
    assert code_of(lambda: g.write_memory("k", b"v", "CACHE", pol)  # type: ignore[arg-type]
                   ) is ErrorCode.INVALID_INPUT


GOOD = {"maxRetentionDays": 1, "autoDeleteOnTermination": False, "anonymizationSupported": False}


@pytest.mark.parametrize("ret", [
    {**GOOD, "maxRetentionDays": 0}, {**GOOD, "maxRetentionDays": -1},
    {**GOOD, "maxRetentionDays": 1.5}, {**GOOD, "maxRetentionDays": 1.0},
    {**GOOD, "maxRetentionDays": "1"}, {**GOOD, "maxRetentionDays": True},
    {**GOOD, "maxRetentionDays": 2147483648},
    {**GOOD, "autoDeleteOnTermination": 0}, {**GOOD, "anonymizationSupported": "no"},
    {"maxRetentionDays": 1, "autoDeleteOnTermination": False},
    {**GOOD, "extra": True}, {}, [], 7, "forever",
])
def test_bad_retention_policy(g: GeneMemory, ret: object) -> None:
    assert code_of(lambda: g.write_memory("k", b"v", "CACHE", retention_policy=ret)  # type: ignore[arg-type]
                   ) is ErrorCode.INVALID_INPUT
    assert g.read_memory("k") is None


def test_max_retention_days_bounds_are_accepted(g: GeneMemory) -> None:
    g.write_memory("a", b"v", "CACHE", retention_policy={**GOOD, "maxRetentionDays": 2147483647})
    g.write_memory("b", b"v", "CACHE", retention_policy={**GOOD, "maxRetentionDays": None})
    assert {e.key for e in g.query_memory()} == {"a", "b"}


@pytest.mark.parametrize("flt", [
    {"bogus": 1}, {"limit": 0}, {"limit": 1001}, {"limit": 2.0}, {"limit": True},
    {"limit": "5"}, {"category": "cache"}, {"keyPrefix": 5}, {"since": "yesterday"},
    {"until": "2026-03-01"}, {"since": 5}, {"until": "2026-03-01T12:00:00"}, "all", [1],
])
def test_bad_filters(g: GeneMemory, flt: object) -> None:
    assert code_of(lambda: g.query_memory(flt)) is ErrorCode.INVALID_INPUT  # type: ignore[arg-type]


def test_limit_default_and_bounds(g: GeneMemory) -> None:
    for i in range(120):
        g.write_memory(f"k{i:03}", b"v", "CACHE")
    assert len(g.query_memory()) == 100
    assert len(g.query_memory({})) == 100
    assert len(g.query_memory({"limit": 1000})) == 120
    assert len(g.query_memory({"limit": 1})) == 1


def test_query_over_4_mib_fails_instead_of_cutting(g: GeneMemory) -> None:
    for i in range(4):
        g.write_memory(f"k{i}", b"v" * (1024 * 1024 - 2), "CACHE")  # 1 MiB each with the key
    assert len(g.query_memory()) == 4  # exactly 4 MiB is fine
    g.write_memory("k4", b"v", "CACHE")
    assert code_of(lambda: g.query_memory()) is ErrorCode.INVALID_INPUT
    assert len(g.query_memory({"limit": 4})) == 4
    assert len(g.query_memory({"keyPrefix": "k4"})) == 1


def test_key_prefix_is_plain_and_bytewise(g: GeneMemory) -> None:
    for key in ["a%", "a_b", "abc", "a", "A", "a/b", "a/b/c", "ab", "é", "e", "a\U0010ffff",
                "a\U0010ffffz", "b"]:
        g.write_memory(key, b"v", "CACHE")

    def found(prefix: str) -> list[str]:
        return sorted(e.key for e in g.query_memory({"keyPrefix": prefix}))

    assert found("a%") == ["a%"]
    assert found("a_") == ["a_b"]
    assert found("a/") == ["a/b", "a/b/c"]
    assert found("a/b") == ["a/b", "a/b/c"]
    assert found("A") == ["A"]
    assert found("é") == ["é"]
    assert found("a\U0010ffff") == ["a\U0010ffff", "a\U0010ffffz"]
    assert found("") == sorted(e.key for e in g.query_memory({"limit": 1000}))
    assert found("zz") == []


def test_query_filters_order_and_bounds(g: GeneMemory, clock: ManualClock) -> None:
    g.write_memory("old", b"v", "CACHE")
    clock.advance(seconds=10)
    t1 = clock.now_us()
    g.write_memory("mid", b"v", "PATTERN")
    g.write_memory("mid2", b"v", "PATTERN")  # same instant: later write first
    clock.advance(seconds=10)
    g.write_memory("new", b"v", "CACHE")
    from rotifer.memory import format_time
    assert [e.key for e in g.query_memory()] == ["new", "mid2", "mid", "old"]
    assert [e.key for e in g.query_memory({"since": format_time(t1)})] == ["new", "mid2", "mid"]
    assert [e.key for e in g.query_memory({"until": format_time(t1)})] == ["old"]
    assert [e.key for e in g.query_memory({"category": "CACHE"})] == ["new", "old"]
    assert [e.key for e in g.query_memory(
        {"since": "2026-03-01T12:00:05+00:00", "until": "2026-03-01T13:00:00+01:00"})] == []
    assert [e.key for e in g.query_memory({"category": Category.PATTERN, "limit": 1})] == ["mid2"]
