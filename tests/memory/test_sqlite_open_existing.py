"""``MemoryStore.open(..., create=False)`` on SQLite: only a store that exists
and holds the memory tables opens; anything else is MEMORY_STORAGE_ERROR
naming the file, and nothing is created or repaired."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.exists() else {}


def test_sqlite_missing_file_is_not_created(tmp_path: Path) -> None:
    dot = tmp_path / ".rotifer"
    with pytest.raises(AgentMemoryError) as caught:
        MemoryStore.open(dot, create=False)
    assert caught.value.code is ErrorCode.STORAGE_ERROR
    assert str(dot / "playground.db") in caught.value.message
    assert not dot.exists()  # not even the folder


@pytest.mark.parametrize("how", ["empty", "garbage", "foreign"])
def test_sqlite_broken_file_is_reported_and_left_alone(tmp_path: Path, how: str) -> None:
    dot = tmp_path / ".rotifer"
    dot.mkdir()
    db = dot / "playground.db"
    if how == "empty":
        db.write_bytes(b"")
    elif how == "garbage":
        db.write_bytes(b"not sqlite\n" * 500)
    else:
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE other (x)")
        conn.close()
    before = contents(dot)
    with pytest.raises(AgentMemoryError) as caught:
        MemoryStore.open(dot, create=False)
    assert caught.value.code is ErrorCode.STORAGE_ERROR
    assert str(db) in caught.value.message
    assert contents(dot) == before


def test_sqlite_existing_store_opens_without_create(tmp_path: Path) -> None:
    dot = tmp_path / ".rotifer"
    with MemoryStore.open(dot) as store:
        store.create_agent("a")
    with MemoryStore.open(dot, create=False) as store:
        assert store.agents() == ["a"]
        store.for_gene("a", "v2:" + "0" * 64, "d").write_memory("d/k", b"v", "CACHE")
        assert store.usage("a")[0] == 4


def test_sqlite_url_without_create(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.db"
    with pytest.raises(AgentMemoryError):
        MemoryStore.open(tmp_path / ".rotifer", f"sqlite:{path}", create=False)
    assert not path.exists()
