"""audit.jsonl rolls over at the size a deployer sets; the hash chain continues
across the files and verify reads them all, oldest first."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore
from rotifer.memory.audit import DEFAULT_MAX_BYTES, MAX_BYTES_ENV, archives, max_bytes_from_env
from rotifer.memory.audit.verify import verify_agent

from .conftest import StoreFactory
from .helpers import gene_id

LIMIT = 4096


def test_the_default_and_the_setting() -> None:
    assert max_bytes_from_env({}) == DEFAULT_MAX_BYTES == 64 * 1024 * 1024
    assert max_bytes_from_env({MAX_BYTES_ENV: "1048576"}) == 1048576
    for bad in ("0", "-5", "lots", "1.5"):
        with pytest.raises(AgentMemoryError) as info:
            max_bytes_from_env({MAX_BYTES_ENV: bad})
        assert info.value.code is ErrorCode.STORAGE_ERROR
        assert MAX_BYTES_ENV in info.value.message


def test_the_log_rolls_over_and_verify_reads_every_file(
        store_factory: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_BYTES_ENV, str(LIMIT))
    rot = tmp_path / ".rotifer"
    stores = [store_factory(rot) for _ in range(3)]  # three writers, each its own AuditLog
    stores[0].create_agent("bot", quota_bytes=3000)

    def work(n: int) -> None:
        g = stores[n].for_gene("bot", gene_id(f"g{n}"), "d")
        for i in range(60):
            g.write_memory(f"k{n}/{i % 9}", b"v" * (i % 40 + 1), "CACHE")
            if i % 7 == 0:
                g.delete_memory(f"k{n}/{i % 9}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log = rot / "audit.jsonl"
    kept = archives(log)
    assert len(kept) >= 3
    assert [p.name for p in kept] == [f"audit.jsonl.{n}" for n in range(1, len(kept) + 1)]
    assert all(p.stat().st_size <= LIMIT for p in [*kept, log])
    assert verify_agent(stores[0], "bot").ok  # its own lines, found by the index
    report = verify_agent(stores[0], "bot", full=True)  # the chain over every file
    assert report.ok, report.message
    assert f"over {sum(len(p.read_bytes().splitlines()) for p in [*kept, log])} lines" \
        in report.message
    # The oldest file removed: the log now starts mid-chain, and verify says so.
    kept[0].unlink()
    report = verify_agent(stores[0], "bot", repair=False)
    assert not report.ok and "starts mid-chain" in report.message


def test_a_single_append_larger_than_the_limit_still_goes_in(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setenv(MAX_BYTES_ENV, "200")
    with MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / 'm.db'}") as store:
        store.create_agent("bot")
        g = store.for_gene("bot", gene_id("g"), "d")
        for i in range(4):
            g.write_memory(f"key-{i}", b"v", "CACHE")  # each line is about 400 bytes
        assert len(archives(tmp_path / ".rotifer" / "audit.jsonl")) == 3
        assert verify_agent(store, "bot").ok
