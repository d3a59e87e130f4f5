"""A deployer's delete that carries what its confirmation showed deletes only if
that is still so, checked in the deleting transaction (SQLite and PostgreSQL):
count and bytes for a category, each entry's version (``seq``) for keys."""

from __future__ import annotations

import pytest

from rotifer.memory import MemoryStore
from rotifer.memory.views.browse import describe_keys
from rotifer.memory.views.deployer_memory import Changed

GENE = "v2:" + "a" * 64


def fill(store: MemoryStore) -> None:
    memory = store.for_gene("agent", GENE, "notes")
    for i in range(3):
        memory.write_memory(f"cache/{i}", b"x" * 10, "CACHE")
    memory.write_memory("ctx/now", b"y" * 10, "CONTEXT")


def keys(store: MemoryStore) -> list[str]:
    return sorted(e.key for e in store.deployer("agent").list())


def test_a_category_that_gained_an_entry_is_not_deleted(store: MemoryStore) -> None:
    fill(store)
    shown = (3, 3 * (7 + 10))
    store.for_gene("agent", GENE, "notes").write_memory("cache/9", b"x" * 10, "CACHE")
    with pytest.raises(Changed) as caught:
        store.deployer("agent").delete_category("CACHE", expect=shown)
    assert "4 entries (68 bytes) now, not the 3 entries (51 bytes)" in caught.value.message
    assert caught.value.code.value == "MEMORY_INVALID_INPUT"
    assert keys(store) == ["cache/0", "cache/1", "cache/2", "cache/9", "ctx/now"]
    assert store.deployer("agent").delete_category("CACHE", expect=(4, 68)) == 4
    assert keys(store) == ["ctx/now"]


def test_a_category_whose_bytes_changed_is_not_deleted(store: MemoryStore) -> None:
    fill(store)
    store.for_gene("agent", GENE, "notes").write_memory("cache/0", b"x" * 5000, "CACHE")
    with pytest.raises(Changed):
        store.deployer("agent").delete_category("CACHE", expect=(3, 51))
    assert len(keys(store)) == 4


def test_keys_written_since_the_confirmation_are_not_deleted(store: MemoryStore) -> None:
    fill(store)
    shown = {e.key: e.seq for e in describe_keys(store, "agent", ["cache/0", "ctx/now"])}
    store.for_gene("agent", GENE, "notes").write_memory("ctx/now", b"z" * 10, "CONTEXT")
    with pytest.raises(Changed) as caught:
        store.deployer("agent").delete_keys(["cache/0", "ctx/now"], expect=shown)
    assert caught.value.keys == ["ctx/now"]
    assert len(keys(store)) == 4  # all or nothing: cache/0 stays too
    fresh = {e.key: e.seq for e in describe_keys(store, "agent", ["cache/0", "ctx/now"])}
    assert store.deployer("agent").delete_keys(["cache/0", "ctx/now"], expect=fresh) == 2
    assert keys(store) == ["cache/1", "cache/2"]


def test_without_expect_the_delete_takes_whatever_is_there(store: MemoryStore) -> None:
    """The stale confirmation's harm, as the console did it before: 3 shown, 4 gone."""
    fill(store)
    store.for_gene("agent", GENE, "notes").write_memory("cache/9", b"x" * 10, "CACHE")
    assert store.deployer("agent").delete_category("CACHE") == 4
