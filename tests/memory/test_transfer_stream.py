"""The streamed export file: what a stream can meet half-way, refused whole.

An import inserts entries as it reads them, so a file that goes bad after
some good entries must still leave the destination without the agent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore
from rotifer.memory.transfer import export_agent, import_agent, read_export

from .conftest import StoreFactory
from .helpers import gene_id


@pytest.fixture
def exported(store_factory: StoreFactory, tmp_path: Path) -> Path:
    store = store_factory(name="src")
    store.create_agent("bot", quota_bytes=100_000)
    mem = store.for_gene("bot", gene_id("g"), "d")
    for i in range(40):
        mem.write_memory(f"d/{i:03d}", b"v" * (10 + i), "PATTERN")
    path = tmp_path / "bot.json"
    export_agent(store, "bot", path)
    return path


def _refused(store: MemoryStore, path: Path, code: ErrorCode = ErrorCode.INVALID_INPUT) -> str:
    with pytest.raises(AgentMemoryError) as info:
        import_agent(store, path)
    assert info.value.code is code, info.value
    assert not store.has_agent("bot")  # nothing half imported
    return str(info.value)


def test_the_file_is_one_json_object_with_one_entry_per_line(exported: Path) -> None:
    lines = exported.read_bytes().splitlines()
    assert lines[0].endswith(b'"entries":[') and lines[-1].startswith(b"],")
    assert len(lines) == 40 + 2
    assert json.loads(exported.read_bytes()) == read_export(exported)


def test_a_file_cut_short_is_refused(exported: Path, store_factory: StoreFactory) -> None:
    lines = exported.read_bytes().splitlines(keepends=True)
    exported.write_bytes(b"".join(lines[:30]))
    assert "cut short" in _refused(store_factory(name="dst"), exported)


def test_a_bad_entry_after_good_ones_leaves_nothing(exported: Path,
                                                    store_factory: StoreFactory) -> None:
    lines = exported.read_bytes().splitlines(keepends=True)
    lines[35] = lines[35].replace(b'"seq":', b'"seq":1', 1)  # its checksum no longer matches
    exported.write_bytes(b"".join(lines))
    assert "checksum" in _refused(store_factory(name="dst"), exported)


def test_entries_over_the_quota_are_found_at_the_end_and_nothing_stays(
        exported: Path, store_factory: StoreFactory) -> None:
    with pytest.raises(AgentMemoryError) as info:
        import_agent(store_factory(name="dst"), exported, quota_bytes=500)
    assert info.value.code is ErrorCode.QUOTA_EXCEEDED
    assert not store_factory(name="dst").has_agent("bot")


def test_data_after_the_end_is_refused(exported: Path, store_factory: StoreFactory) -> None:
    exported.write_bytes(exported.read_bytes() + b'{"more": 1}\n')
    assert "after its end" in _refused(store_factory(name="dst"), exported)


def test_a_file_on_one_line_is_still_read(exported: Path, store_factory: StoreFactory) -> None:
    exported.write_text(json.dumps(read_export(exported)))
    report = import_agent(store_factory(name="dst"), exported)
    assert report.entries == 40
