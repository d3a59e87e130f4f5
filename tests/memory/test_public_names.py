"""The public names the contract promises stay, whatever rotifer calls them inside."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest

import rotifer.memory
from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore

from .helpers import gene_id


def test_memory_error_is_the_public_name_of_the_one_error_class() -> None:
    """``rotifer.memory.MemoryError`` (CONTRACT.md) is the class every refusal
    raises, not Python's builtin out-of-memory error."""
    public = rotifer.memory.MemoryError
    assert public is AgentMemoryError
    assert public is not builtins.MemoryError
    assert "MemoryError" in rotifer.memory.__all__
    assert not issubclass(public, builtins.MemoryError)


def test_a_refusal_is_caught_by_the_public_name(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path / ".rotifer")
    try:
        store.create_agent("agent")
        with pytest.raises(rotifer.memory.MemoryError) as caught:
            store.for_gene("agent", gene_id("a"), "d").delete_memory("missing")
        assert caught.value.code is ErrorCode.NOT_FOUND
    finally:
        store.close()
