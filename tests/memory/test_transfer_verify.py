"""``verify_import``: does a store hold exactly what an export describes?

(Named for what it checks, apart from the audit log's ``verify_agent``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, ManualClock, MemoryStore
from rotifer.memory.transfer import export_agent, import_agent, read_export, verify_import

from .helpers import gene_id

A = gene_id("a")


def test_verify_import_passes_an_import_and_catches_a_changed_entry(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-01T12:00:00Z")
    source = MemoryStore.open(tmp_path / "src" / ".rotifer", clock=clock)
    target = MemoryStore.open(tmp_path / "dst" / ".rotifer", clock=clock)
    try:
        source.create_agent("bot", quota_bytes=4096)
        gene = source.for_gene("bot", A, "d")
        gene.write_memory("a", b"one", "PREFERENCE")
        gene.write_memory("b", b"two", "CONTEXT")
        export_agent(source, "bot", tmp_path / "bot.json")
        document = read_export(tmp_path / "bot.json")
        import_agent(target, tmp_path / "bot.json")
        verify_import(target, document)
        with pytest.raises(AgentMemoryError) as caught:
            verify_import(source, document)  # the source's change count is one behind
        assert caught.value.code is ErrorCode.STORAGE_ERROR
        target.for_gene("bot", A, "d").delete_memory("b")
        with pytest.raises(AgentMemoryError, match="verification failed") as caught:
            verify_import(target, document)
        assert caught.value.code is ErrorCode.STORAGE_ERROR
    finally:
        source.close()
        target.close()
