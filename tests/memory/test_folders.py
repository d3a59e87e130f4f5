"""The distinct folders under a key prefix, one entry read each
(rotifer.memory.views.folders, issue 32), on SQLite and PostgreSQL."""

from __future__ import annotations

from rotifer.memory import ManualClock, MemoryEntry, MemoryStore
from rotifer.memory.views.folders import deployer_folders, gene_folders
from tests.memory.helpers import RETAIN_1_DAY, gene_id

A, B = gene_id("folders-a"), gene_id("folders-b")
MINE = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
        "sharePolicy": "PRIVATE"}


def test_one_entry_per_folder_is_handed_to_pick(store: MemoryStore, clock: ManualClock
                                                ) -> None:
    a = store.for_gene("agent", A, "d")
    b = store.for_gene("agent", B, "d")
    for i in range(40):
        a.write_memory(f"p/one/k{i:02}", b"1", "CONTEXT")
        a.write_memory(f"p/one/two/k{i:02}", b"2", "CONTEXT")
    a.write_memory("p/top", b"3", "CONTEXT")
    a.write_memory("p/old/k", b"4", "CONTEXT", retention_policy=RETAIN_1_DAY)
    b.write_memory("p/theirs/k", b"5", "CONTEXT", MINE)
    b.write_memory("p/one/a", b"6", "CONTEXT", MINE)  # the folder's first key: not A's to read
    a.write_memory("q/else/k", b"7", "CONTEXT")
    clock.advance(days=2)  # p/old/k has expired
    seen: list[str] = []

    def pick(entry: MemoryEntry) -> str:
        seen.append(entry.key)
        return entry.key

    assert gene_folders(a, "p/", pick) == {
        "p/": "p/top", "p/one/": "p/one/k39", "p/one/two/": "p/one/two/k00"}
    # Not 80 entries: one each, and for p/one/ the newest A may read.
    assert sorted(seen) == ["p/one/k39", "p/one/two/k00", "p/top"]
    assert set(deployer_folders(store.deployer("agent"), "p/", pick)) == {
        "p/", "p/one/", "p/one/two/", "p/theirs/"}
    seen.clear()
    assert gene_folders(b, "p/one/", pick) == {"p/one/": "p/one/a", "p/one/two/": "p/one/two/k00"}
    assert seen == ["p/one/a", "p/one/two/k00"]
    assert set(gene_folders(b, "", pick)) == {"p/", "p/one/", "p/one/two/", "p/theirs/",
                                              "q/else/"}


def test_a_folder_whose_first_entry_is_turned_down_is_read_on(store: MemoryStore) -> None:
    a = store.for_gene("agent", A, "d")
    a.write_memory("f/a", b"junk", "CONTEXT")
    a.write_memory("f/b", b"item", "CONTEXT")
    a.write_memory("g/a", b"junk", "CONTEXT")
    picked = gene_folders(a, "", lambda e: e.key if e.value == b"item" else None)
    assert picked == {"f/": "f/b"}  # g/ holds nothing pick takes
