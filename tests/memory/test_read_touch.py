"""A read that only changes lastAccessedBy: one conditional statement, no change.

Such a read takes no change number and writes no audit line, so it needs
neither the agent's lock nor a transaction (issue 16): ``Transaction.touch_if``
notes the reader only if the entry is still the one the read looked up, and
the read goes the full way otherwise.  The same on every backend.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rotifer.memory import ManualClock, MemoryStore

from .conftest import ALL_BACKENDS
from .helpers import RETAIN_1_DAY, audit_lines, gene_id

A, B, C = gene_id("a"), gene_id("b"), gene_id("c")


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def test_a_read_by_another_gene_notes_it_without_a_change(store: MemoryStore,
                                                          tmp_path: Path) -> None:
    store.for_gene("agent", A, "d").write_memory("k", b"v", "PATTERN")
    before = store.agent_record("agent")
    logged = len(audit_lines(tmp_path / ".rotifer"))
    for reader in (B, C, A):
        entry = store.for_gene("agent", reader, "d").read_memory("k")
        assert entry is not None and entry.last_accessed_by == reader
        with store.backend.peek() as tx:
            stored = tx.get("agent", "k")
        assert stored is not None and stored.last_accessed_by == reader
    assert store.agent_record("agent") == before  # no number, no time, no bytes
    assert len(audit_lines(tmp_path / ".rotifer")) == logged  # no audit line


def test_touch_if_applies_only_to_the_entry_looked_up(store: MemoryStore,
                                                      clock: ManualClock) -> None:
    a = store.for_gene("agent", A, "d")
    a.write_memory("k", b"v", "PATTERN")
    a.write_memory("brief", b"v", "CACHE", retention_policy=RETAIN_1_DAY)
    with store.backend.peek() as tx:
        k, brief = tx.get("agent", "k"), tx.get("agent", "brief")
    assert k is not None and brief is not None and brief.expires_us is not None
    now = clock.now_us()
    with store.backend.peek() as tx:
        assert not tx.touch_if("agent", "k", B, k.seq + 1, now)  # rewritten since
        assert not tx.touch_if("agent", "gone", B, k.seq, now)  # deleted since
        assert not tx.touch_if("other", "k", B, k.seq, now)  # another agent
        assert not tx.touch_if("agent", "brief", B, brief.seq, brief.expires_us)  # expired
        assert not tx.touch_if("agent", "k\x00", B, k.seq, now)  # no such key, no error
        assert tx.get("agent", "k") == k and tx.get("agent", "brief") == brief
        assert tx.touch_if("agent", "k", B, k.seq, now)
        assert tx.touch_if("agent", "brief", B, brief.seq, brief.expires_us - 1)
        touched = tx.get("agent", "k")
    assert touched is not None and touched.last_accessed_by == B
    assert touched.seq == k.seq and touched.updated_us == k.updated_us


def test_a_read_of_an_expired_entry_still_purges_it(store: MemoryStore, clock: ManualClock,
                                                    tmp_path: Path) -> None:
    """Nothing lock-free is done when something has expired: the change purges
    (and audits) first, as before."""
    store.for_gene("agent", A, "d").write_memory("brief", b"v", "CACHE",
                                                 retention_policy=RETAIN_1_DAY)
    clock.advance(seconds=2 * 86_400)
    assert store.for_gene("agent", B, "d").read_memory("brief") is None
    assert audit_lines(tmp_path / ".rotifer")[-1]["action"] == "expire"


def test_a_query_past_the_first_page_reads_one_snapshot(store: MemoryStore,
                                                        clock: ManualClock) -> None:
    """A query answered by the first page runs as that one statement; one that
    needs more (a large limit, or many entries it may not read) is answered
    again from a read transaction's snapshot, with the same rules."""
    a, b = store.for_gene("agent", A, "d"), store.for_gene("agent", B, "other")
    private = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
               "sharePolicy": "PRIVATE"}
    for i in range(40):
        clock.advance(micros=1)
        a.write_memory(f"open/{i:03d}", b"v", "PATTERN", access_policy={
            "readScope": "ALL_GENES", "writeScope": "CREATOR_GENE_ONLY",
            "sharePolicy": "PRIVATE"})
    for i in range(300):  # newer, and unreadable by b: b's page 1 holds none of its answer
        clock.advance(micros=1)
        a.write_memory(f"mine/{i:03d}", b"v", "PATTERN", access_policy=private)
    assert [e.key for e in b.query_memory({"limit": 1000})] == [
        f"open/{i:03d}" for i in reversed(range(40))]
    everything = a.query_memory({"limit": 1000})
    assert len(everything) == 340 and everything[0].key == "mine/299"
    assert [e.key for e in a.query_memory({"limit": 256})] == [e.key for e in everything[:256]]
    assert [e.key for e in a.query_memory({"limit": 257})] == [e.key for e in everything[:257]]
