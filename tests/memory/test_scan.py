"""``GeneMemory.pick_memory`` and ``DeployerMemory.pick`` (rotifer.memory.views.scan):
entries under a prefix newest first, read only until ``count`` are kept, the
caller's read scope and expiry applied, no 4 MiB bound -- on both backends."""

from __future__ import annotations

from rotifer.memory import ErrorCode, ManualClock, MemoryEntry, MemoryStore

from .helpers import RETAIN_1_DAY, code_of, gene_id

A, B = gene_id("scan-a"), gene_id("scan-b")
MINE = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
        "sharePolicy": "PRIVATE"}


def _fill(store: MemoryStore) -> None:
    a = store.for_gene("agent", A, "d")
    for i in range(30):
        a.write_memory(f"p/{i:02d}", str(i).encode(), "CONTEXT")
    a.write_memory("q/other", b"x", "CONTEXT")


def test_reads_only_until_the_page_is_full(store: MemoryStore) -> None:
    _fill(store)
    seen: list[str] = []

    def pick(entry: MemoryEntry) -> str | None:
        seen.append(entry.key)
        return entry.key if int(entry.value) % 2 == 0 else None

    got = store.for_gene("agent", A, "d").pick_memory("p/", pick, 3)
    assert got == ["p/28", "p/26", "p/24"]  # newest first, the ones pick kept
    assert seen == ["p/29", "p/28", "p/27", "p/26", "p/25", "p/24"]  # and no further
    seen.clear()
    assert len(store.deployer("agent").pick("p/", pick, None)) == 15  # None: all of them
    assert len(seen) == 30


def test_leaves_out_what_the_gene_may_not_read_and_what_expired(
        store: MemoryStore, clock: ManualClock) -> None:
    a, b = store.for_gene("agent", A, "d"), store.for_gene("agent", B, "d")
    a.write_memory("p/mine", b"1", "CONTEXT", MINE)
    a.write_memory("p/short", b"2", "CONTEXT", retention_policy=RETAIN_1_DAY)
    a.write_memory("p/shared", b"3", "CONTEXT")
    keys = lambda e: e.key  # noqa: E731
    assert b.pick_memory("p/", keys, 10) == ["p/shared", "p/short"]
    assert a.pick_memory("p/", keys, 10) == ["p/shared", "p/short", "p/mine"]
    clock.advance(days=2)
    assert b.pick_memory("p/", keys, 10) == ["p/shared"]
    assert store.deployer("agent").pick("p/", keys, 10) == ["p/shared", "p/mine"]


def test_no_4_mib_bound_on_what_is_kept(store: MemoryStore) -> None:
    store.create_agent("big", quota_bytes=64 * 1024 * 1024)
    a = store.for_gene("big", A, "d")
    for i in range(6):
        a.write_memory(f"b/{i}", b"x" * (900 * 1024), "CONTEXT")
    assert code_of(lambda: a.query_memory({"keyPrefix": "b/", "limit": 6})) \
        is ErrorCode.INVALID_INPUT
    assert len(a.pick_memory("b/", lambda e: e.key, 6)) == 6


def test_refusals(store: MemoryStore) -> None:
    a = store.for_gene("agent", A, "d")
    assert a.pick_memory("p/", lambda e: e.key, 0) == []
    assert code_of(lambda: a.pick_memory("p\x00", lambda e: e.key, 1)) is ErrorCode.INVALID_INPUT
    assert code_of(lambda: a.pick_memory("p/", lambda e: e.key, -1)) is ErrorCode.INVALID_INPUT
    assert code_of(lambda: store.for_gene("agent", None, "d").pick_memory(
        "p/", lambda e: e.key, 1)) is ErrorCode.ACCESS_DENIED
