"""The backend interface, row level, on SQLite and PostgreSQL alike.

The store's rules assume a backend hands rows back exactly as stored and in
exactly the orders of backend.py; these tests hold both backends to that, so
the policy code above them behaves identically on either.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rotifer.memory import (
    AccessPolicy,
    AgentMemoryError,
    Category,
    DataPolicy,
    ErrorCode,
    RetentionPolicy,
    Scope,
    SharePolicy,
)
from rotifer.memory.policy import NEVER_US
from rotifer.memory.storage.backend import AgentRecord, Backend, Row

from .conftest import StoreFactory

BATCH = 256  # both backends page by this many rows; the tests cross page boundaries


@pytest.fixture
def raw(store_factory: StoreFactory) -> Backend:
    return store_factory().backend


def agent(tx: Any, agent_id: str = "ag", quota: int = 10**9) -> None:
    tx.insert_agent(AgentRecord(agent_id, quota, DataPolicy(), 0, 1))


def row(key: str, *, seq: int, updated: int = 1_000, category: Category = Category.CACHE,
        value: bytes = b"v", agent_id: str = "ag", expires: int | None = None,
        retention: RetentionPolicy | None = None, domain: str | None = "dom") -> Row:
    return Row(agent_id=agent_id, key=key, category=category, value=value,
               created_by="v2:" + "a" * 64, creator_domain=domain,
               last_accessed_by="v2:" + "b" * 64, created_us=updated - 5, updated_us=updated,
               access=AccessPolicy(), retention=retention, expires_us=expires, seq=seq)


def test_rows_round_trip_every_field(raw: Backend) -> None:
    rows = [
        row("k/bytes", seq=1, value=bytes(range(256)) * 4),
        row("k/big", seq=2, value=b"\x00" * (1024 * 1024), category=Category.PREFERENCE),
        row("k/é😀", seq=3, value=b"", domain=None, expires=NEVER_US,
            retention=RetentionPolicy(None, True, True)),
        row("k/ret", seq=4, updated=2**53, expires=2**53 + 86_400_000_000,
            retention=RetentionPolicy(2_147_483_647, False, True)),
        Row(agent_id="ag", key="k/policy", category=Category.CONTEXT, value=b"x",
            created_by="c", creator_domain="", last_accessed_by="d", created_us=0,
            updated_us=0, access=AccessPolicy(Scope.CREATOR_GENE_ONLY, Scope.ALL_GENES,
                                              SharePolicy.KNOWLEDGE_GENE),
            retention=None, expires_us=None, seq=2**62),
    ]
    with raw.write("ag") as tx:
        agent(tx)
        for r in rows:
            tx.put(r)
    with raw.read() as tx:
        for r in rows:
            assert tx.get("ag", r.key) == r
        assert tx.count("ag") == len(rows)
        assert tx.sum_sizes("ag") == sum(r.size for r in rows)
    with raw.peek() as tx:
        assert tx.get("ag", "k/none") is None
        assert tx.get("other", "k/bytes") is None


def test_put_replaces_the_row_with_the_same_key(raw: Backend) -> None:
    with raw.write("ag") as tx:
        agent(tx)
        tx.put(row("k", seq=1, value=b"old", retention=RetentionPolicy(3)))
        tx.put(row("k", seq=2, value=b"new", category=Category.PATTERN, updated=5_000))
    with raw.read() as tx:
        assert tx.get("ag", "k") == row("k", seq=2, value=b"new", category=Category.PATTERN,
                                        updated=5_000)
        assert tx.count("ag") == 1


def test_touch_changes_only_last_accessed_by(raw: Backend) -> None:
    with raw.write("ag") as tx:
        agent(tx)
        tx.put(row("k", seq=1))
        tx.touch("ag", "k", "v2:reader")
    with raw.peek() as tx:
        got = tx.get("ag", "k")
    assert got is not None
    assert got.last_accessed_by == "v2:reader"
    assert got == row("k", seq=1)._replace(last_accessed_by="v2:reader")


def test_cleanup_order_is_update_time_then_write_order_across_pages(raw: Backend) -> None:
    # 600 rows, many in the same microsecond: ties must fall back to write order.
    rows = [row(f"k{i:04d}", seq=1000 - i, updated=(i * 7) % 50) for i in range(600)]
    with raw.write("ag") as tx:
        agent(tx)
        for r in rows:
            tx.put(r)
        tx.put(row("other-category", seq=5000, category=Category.PATTERN, updated=0))
    expected = [r.key for r in sorted(rows, key=lambda r: (r.updated_us, r.seq))]
    with raw.write("ag") as tx:
        seen = []
        for brief in tx.iter_oldest("ag", Category.CACHE):
            seen.append(brief.key)
            tx.delete("ag", [brief.key])  # writing between pages must not disturb the walk
        assert seen == expected
        assert tx.count("ag") == 1


def test_newest_first_is_the_reverse_order(raw: Backend) -> None:
    rows = [row(f"k{i}", seq=i + 1, updated=i // 3) for i in range(BATCH + 40)]
    with raw.write("ag") as tx:
        agent(tx)
        for r in rows:
            tx.put(r)
    with raw.read() as tx:
        got = [r.key for r in tx.iter_newest("ag")]
    assert got == [r.key for r in sorted(rows, key=lambda r: (r.updated_us, r.seq),
                                         reverse=True)]


def test_expired_entries_in_expiry_order_up_to_now_inclusive(raw: Backend) -> None:
    with raw.write("ag") as tx:
        agent(tx)
        for i in range(BATCH + 10):
            tx.put(row(f"e{i}", seq=i + 1, expires=100 + (i % 5)))
        tx.put(row("never", seq=10_000, expires=None))
        tx.put(row("later", seq=10_001, expires=105))
    with raw.read() as tx:
        got = list(tx.iter_expired("ag", 104))
        assert [(b.key, b.size) for b in got] == [
            (f"e{i}", len(f"e{i}") + 1)
            for i in sorted(range(BATCH + 10), key=lambda i: (100 + i % 5, i))]
        assert list(tx.iter_expired("ag", 99)) == []


# Keys built from characters where byte order, locale order and LIKE differ.
ALPHABET = ["a", "b", "A", "_", "%", "\\", "/", " ", "é", "ß", "\u00ff", "\u0100",
            "\uffff", "😀", "\U0010ffff", "z", "~"]
KEYS = sorted({"".join(p) for p in
               [(x,) for x in ALPHABET] + [(x, y) for x in ALPHABET[:9] for y in ALPHABET[:9]]
               + [(x, y, z) for x in "a_%é" for y in ALPHABET for z in "a😀"]})


@pytest.fixture
def populated(raw: Backend) -> Iterator[tuple[Backend, list[Row]]]:
    cats = list(Category)
    rows = [row(k, seq=i + 1, updated=(i * 13) % 97, category=cats[i % 4])
            for i, k in enumerate(KEYS)]
    with raw.write("ag") as tx:
        agent(tx)
        for r in rows:
            tx.put(r)
    yield raw, rows


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.one_of(st.none(), st.sampled_from(KEYS),
                        st.text(alphabet=st.sampled_from(ALPHABET), max_size=3)),
       category=st.one_of(st.none(), st.sampled_from(list(Category))),
       since=st.one_of(st.none(), st.integers(0, 100)),
       until=st.one_of(st.none(), st.integers(0, 100)))
def test_query_matches_a_plain_python_filter(
        populated: tuple[Backend, list[Row]], prefix: str | None, category: Category | None,
        since: int | None, until: int | None) -> None:
    raw, rows = populated
    with raw.read() as tx:
        got = [r.key for r in tx.iter_newest("ag", category=category, key_prefix=prefix,
                                             since_us=since, until_us=until)]
    want = [r.key for r in sorted(rows, key=lambda r: (r.updated_us, r.seq), reverse=True)
            if (not prefix or r.key.startswith(prefix))
            and (category is None or r.category is category)
            and (since is None or r.updated_us >= since)
            and (until is None or r.updated_us < until)]
    assert got == want


def test_prefix_is_plain_text_never_a_pattern(raw: Backend) -> None:
    keys = ["a%b", "a_b", "axb", "a\\b", "A_b", "a%", "b"]
    with raw.write("ag") as tx:
        agent(tx)
        for i, k in enumerate(keys):
            tx.put(row(k, seq=i + 1))
    with raw.read() as tx:
        def match(prefix: str) -> set[str]:
            return {r.key for r in tx.iter_newest("ag", key_prefix=prefix)}
        assert match("a%") == {"a%b", "a%"}
        assert match("a_") == {"a_b"}
        assert match("a\\") == {"a\\b"}
        assert match("a") == {"a%b", "a_b", "axb", "a\\b", "a%"}
        assert match("a\x00") == set()  # no key holds NUL


def test_agents_list_in_code_point_order(raw: Backend) -> None:
    ids = ["b", "a", "é", "Z", "😀", "\uffff", "a b", "_"]
    for agent_id in ids:
        with raw.write(agent_id) as tx:
            agent(tx, agent_id)
    with raw.peek() as tx:
        assert tx.list_agents() == sorted(ids)
        assert tx.get_agent("é") == AgentRecord("é", 10**9, DataPolicy(), 0, 1)
        assert tx.get_agent("a\x00") is None


def test_agent_settings_and_counters(raw: Backend) -> None:
    with raw.write("ag") as tx:
        tx.insert_agent(AgentRecord("ag", 4096, DataPolicy(30, True), 0, 1))
        tx.put(row("k", seq=1, value=b"12345"))
        tx.update_agent("ag", 6, 2, 0)
    with raw.peek() as tx:
        assert tx.get_agent("ag") == AgentRecord("ag", 4096, DataPolicy(30, True), 6, 2)


def test_delete_keys_and_whole_agent(raw: Backend) -> None:
    with raw.write("ag") as tx:
        agent(tx)
        agent(tx, "keep")
        for i in range(10):
            tx.put(row(f"k{i}", seq=i + 1))
        tx.put(row("k0", seq=99, agent_id="keep"))
        tx.delete("ag", ["k1", "k2", "missing"])
        tx.delete("ag", [])
    with raw.read() as tx:
        assert tx.count("ag") == 8
    with raw.write("ag") as tx:
        tx.delete_agent("ag")
    with raw.read() as tx:
        assert tx.get_agent("ag") is None
        assert tx.count("ag") == 0
        assert tx.count("keep") == 1
        assert tx.list_agents() == ["keep"]


def test_updating_a_missing_agent_is_a_storage_error(raw: Backend) -> None:
    with pytest.raises(AgentMemoryError) as info, raw.write("ghost") as tx:
        tx.update_agent("ghost", 0, 1, 0)
    assert info.value.code is ErrorCode.STORAGE_ERROR


def test_an_exception_rolls_the_whole_transaction_back(raw: Backend) -> None:
    with raw.write("ag") as tx:
        agent(tx)
    with pytest.raises(RuntimeError), raw.write("ag") as tx:
        tx.put(row("k", seq=1))
        tx.update_agent("ag", 2, 2, 0)
        raise RuntimeError("boom")
    with raw.read() as tx:
        assert tx.get("ag", "k") is None
        assert tx.get_agent("ag") == AgentRecord("ag", 10**9, DataPolicy(), 0, 1)
    with raw.write("ag") as tx:  # the backend is still usable
        tx.put(row("k", seq=1))
    with raw.peek() as tx:
        assert tx.count("ag") == 1


def test_a_read_sees_one_snapshot(store_factory: StoreFactory) -> None:
    raw = store_factory().backend
    other = store_factory().backend  # a second connection on the same database
    with raw.write("ag") as tx:
        agent(tx)
        tx.put(row("k0", seq=1))
    with raw.read() as tx:
        assert tx.count("ag") == 1
        with other.write("ag") as tx2:
            tx2.put(row("k1", seq=2))
        assert tx.count("ag") == 1
        assert tx.get("ag", "k1") is None
    with raw.read() as tx:
        assert tx.count("ag") == 2


def test_reopening_keeps_everything(store_factory: StoreFactory) -> None:
    first = store_factory()
    with first.backend.write("ag") as tx:
        agent(tx)
        tx.put(row("k", seq=1, value=b"kept"))
    first.close()
    again = store_factory()
    with again.backend.peek() as tx:
        got = tx.get("ag", "k")
    assert got is not None and got.value == b"kept"


def test_writers_on_one_agent_take_turns(store_factory: StoreFactory) -> None:
    """The second writer waits for the first and then sees what it committed."""
    one, two = store_factory().backend, store_factory().backend
    with one.write("ag") as tx:
        agent(tx)
    started, done = threading.Event(), threading.Event()
    seen: list[AgentRecord | None] = []

    def second() -> None:
        started.set()
        with two.write("ag") as tx:
            seen.append(tx.get_agent("ag"))
        done.set()

    with one.write("ag") as tx:
        tx.update_agent("ag", 0, 42, 0)
        thread = threading.Thread(target=second)
        thread.start()
        started.wait()
        assert not done.wait(0.3)  # blocked behind our lock
    thread.join(30)
    assert seen == [AgentRecord("ag", 10**9, DataPolicy(), 0, 42)]
