"""The deployer's reads (what the LangGraph store's deployer caller uses):
``DeployerMemory.read`` answers any live entry whatever its policies, leaves
``lastAccessedBy`` alone and never returns an expired entry;
``list(key_prefix=)`` is a plain prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, ManualClock
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import RETAIN_1_DAY, actions, gene_id

PRIVATE = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
           "sharePolicy": "PRIVATE"}


def test_the_deployer_reads_any_live_entry(store_factory: StoreFactory, tmp_path: Path) -> None:
    clock = ManualClock("2026-03-01T12:00:00Z")
    rot = tmp_path / ".rotifer"
    store = store_factory(rot, clock=clock)
    store.create_agent("bot")
    gene = store.for_gene("bot", gene_id("a"), "d")
    gene.write_memory("p/secret", b"1", "PREFERENCE", PRIVATE)
    gene.write_memory("p_x", b"2", "CACHE", None, RETAIN_1_DAY)
    gene.write_memory("q/other", b"3", "CACHE")
    owner = store.deployer("bot")
    with pytest.raises(AgentMemoryError):  # a gene of another id may not read it ...
        store.for_gene("bot", gene_id("b"), "d").read_memory("p/secret")
    entry = owner.read("p/secret")  # ... the owner may
    assert entry is not None and entry.value == b"1"
    assert entry.last_accessed_by == gene_id("a")  # unchanged: it names genes
    assert owner.read("nothing") is None
    assert [e.key for e in owner.list(key_prefix="p/")] == ["p/secret"]  # "_" is plain
    assert [e.key for e in owner.list(key_prefix="p")] == ["p_x", "p/secret"]
    clock.advance(days=1, seconds=1)
    assert owner.read("p_x") is None
    assert ("expire", "p_x") in actions(rot)
    for bad in ("", "a\x00b", "k" * 1025):
        with pytest.raises(AgentMemoryError) as caught:
            owner.read(bad)
        assert caught.value.code is ErrorCode.INVALID_INPUT
    with pytest.raises(AgentMemoryError) as caught:
        owner.list(key_prefix=5)  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.INVALID_INPUT
