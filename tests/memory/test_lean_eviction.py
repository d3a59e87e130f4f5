"""A lean write that must evict (or be refused over quota) goes on with the full
path's body in its own transaction (``Engine.change_holding``) instead of
rolling back and starting the full path over (issue 33, target 3).

On both backends, against a store with the lean paths off: the same answers,
the same audit bytes (the evictions' lines, the refusal's, the ``rolled_back``
line of a change that failed after its append), the same stored rows and the
same history index; and the lean store opened ONE write transaction for the
call where it opened two before (a spy on ``Backend.write``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, ManualClock, MemoryStore
from rotifer.memory.engine import core
from rotifer.memory.views.gene_memory import GeneMemory
from rotifer.memory.views.gene_view import FULL

from .conftest import StoreFactory
from .helpers import gene_id

GENE = (gene_id("g1"), "d1")
QUOTA = 160


def log_bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def rows(store: MemoryStore) -> list[Any]:
    """The agent, its entries and its history index (places and columns)."""
    with store.backend.read() as tx:
        return [tx.get_agent("tiny"), *tx.iter_by_key("tiny"), *tx.index_entries("tiny")]


def outcome(call: Callable[[], Any]) -> Any:
    try:
        return call().to_json()
    except AgentMemoryError as exc:
        return ("error", exc.code, exc.message)


@pytest.fixture
def pair(store_factory: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[dict[str, MemoryStore]]:
    """A lean and a full store on one clock, each with the agent ``tiny`` (160 B)."""
    monkeypatch.setattr("rotifer.memory.store.new_epoch", lambda: "0123456789ab")
    clock = ManualClock("2026-03-01T12:00:00Z")
    stores = {way: store_factory(tmp_path / way, clock=clock, name=way)
              for way in ("lean", "full")}
    stores["lean"].lean_paths, stores["full"].lean_paths = True, False
    for store in stores.values():
        store.create_agent("tiny", quota_bytes=QUOTA)
    yield stores
    for store in stores.values():
        store.close()


@pytest.fixture
def ways(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """``lean`` / ``full``: how the lean write answered each write it returned from."""
    counts: Counter[str] = Counter()
    real = GeneMemory._write_lean

    def spy(*args: Any) -> Any:
        answer = real(*args)
        counts["full" if answer is FULL else "lean"] += 1
        return answer
    monkeypatch.setattr(GeneMemory, "_write_lean", spy)
    return counts


def transactions(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every write transaction ``store`` opens from now on (its agent's name)."""
    opened: list[str] = []
    real = store.backend.write

    def write(agent_id: str, *args: Any, **kwargs: Any) -> AbstractContextManager[Any]:
        opened.append(agent_id)
        return real(agent_id, *args, **kwargs)
    monkeypatch.setattr(store.backend, "write", write)
    return opened


def fill(stores: dict[str, MemoryStore]) -> None:
    for store in stores.values():
        memory = store.for_gene("tiny", *GENE)
        memory.write_memory("c/1", b"c" * 40, "CACHE")
        memory.write_memory("c/2", b"c" * 40, "CACHE")
        memory.write_memory("p/1", b"p" * 40, "PATTERN")


def test_an_eviction_and_a_refusal_run_in_the_lean_write_s_transaction(
        pair: dict[str, MemoryStore], ways: Counter[str], monkeypatch: pytest.MonkeyPatch,
        backend: str) -> None:
    fill(pair)
    opened = transactions(pair["lean"], monkeypatch)
    calls = [("n/1", b"n" * 90, "PREFERENCE"),   # evicts c/1 and c/2 (CACHE first)
             ("c/3", b"n" * 40, "CACHE"),        # evicts p/1
             ("n/3", b"n" * 200, "PREFERENCE")]  # over quota even after cleanup: refused
    for key, value, category in calls:
        answers = [outcome(lambda s=store, k=key, v=value, c=category: s.for_gene(
            "tiny", *GENE).write_memory(k, v, c)) for store in pair.values()]
        assert answers[0] == answers[1], key
        assert log_bytes(pair["lean"].audit.path) == log_bytes(pair["full"].audit.path), key
    assert answers[0][0] == "error" and answers[0][1] is ErrorCode.QUOTA_EXCEEDED
    assert rows(pair["lean"]) == rows(pair["full"])
    log = log_bytes(pair["lean"].audit.path)
    assert log.count(b'"action":"evict"') == 3 and log.count(b'"action":"quota_exceeded"') == 1
    # The lean store: one transaction per call, each answered by the lean write
    # (the refusal is raised from inside it: the spy sees 3 fills + 2 calls).
    assert opened == ["tiny"] * 3
    assert ways["lean"] == 5 and ways["full"] == 0, ways


def test_a_handed_over_write_that_fails_after_its_append_is_rolled_back(
        pair: dict[str, MemoryStore], ways: Counter[str], monkeypatch: pytest.MonkeyPatch,
        backend: str) -> None:
    """The change's lines went out, then it failed before the commit: the lean
    write settles the handed-over change as the full path does (its
    ``rolled_back`` line), and nothing was evicted."""
    fill(pair)
    before = {way: rows(store) for way, store in pair.items()}
    real = core.log_change

    def failing(*args: Any, **kwargs: Any) -> str:
        real(*args, **kwargs)
        raise RuntimeError("after the append")
    monkeypatch.setattr(core, "log_change", failing)
    for store in pair.values():
        with pytest.raises(RuntimeError, match="after the append"):
            store.for_gene("tiny", *GENE).write_memory("n/1", b"n" * 90, "PREFERENCE")
    monkeypatch.setattr(core, "log_change", real)
    log = log_bytes(pair["lean"].audit.path)
    assert log == log_bytes(pair["full"].audit.path)
    assert log.count(b'"action":"evict"') == 2 and log.count(b'"action":"rolled_back"') == 1
    after = {way: rows(store) for way, store in pair.items()}
    # Nothing evicted or written; the index holds the rolled_back line besides.
    assert after["lean"] == after["full"]
    assert after["lean"][:4] == before["lean"][:4]
    assert ways["lean"] == 3 and ways["full"] == 0, ways
