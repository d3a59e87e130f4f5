"""The audit log is anchored in the store (issue 22, item 5).

A forger who can rewrite the log file can recompute its whole hash chain, so
the chain alone cannot show an edit.  The store therefore commits, with each
change, the hash of that change's last line (the agent's ``head``), and
``verify`` checks that the log's chain ends there.  Each attack runs for real
on a real log and store, and the same attack is shown to pass when the
anchor check is switched off (so the test bites).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rotifer.memory import ManualClock, MemoryStore
from rotifer.memory.audit.text import ENCODER, chain
from rotifer.memory.audit.verify import verify_agent

from .conftest import StoreFactory
from .helpers import gene_id

A, B = gene_id("owner"), gene_id("forger")


@pytest.fixture
def store(store_factory: StoreFactory, tmp_path: Path) -> MemoryStore:
    store = store_factory(clock=ManualClock("2026-03-01T12:00:00Z"))
    store.create_agent("m")
    memory = store.for_gene("m", A, "d")
    memory.write_memory("d/pref", b"1", "PREFERENCE")
    memory.write_memory("d/pref", b"2", "PREFERENCE")  # the update the forger claims
    memory.write_memory("d/other", b"x", "CONTEXT")
    return store


def rewrite(log: Path, edit: Any) -> None:
    """Apply ``edit`` to the parsed lines and write the log again with every
    hash recomputed: a forger's consistent chain."""
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    for line in lines:
        line.pop("prev")
    edit(lines)
    data, _ = chain([ENCODER.encode(line).encode() for line in lines], None)
    log.write_bytes(data)


def forge_actor(lines: list[dict[str, Any]]) -> None:
    update = next(x for x in lines if x["action"] == "update")
    update["actor"] = B


def test_a_recomputed_chain_no_longer_ends_at_the_anchor(store: MemoryStore,
                                                         tmp_path: Path) -> None:
    log = tmp_path / ".rotifer" / "audit.jsonl"
    assert verify_agent(store, "m").ok
    rewrite(log, forge_actor)
    assert B in log.read_text()
    report = verify_agent(store, "m", repair=False)
    assert not report.ok
    assert "anchor" in report.message and "rewritten" in report.message, report.message
    # The protection switched off: the forged log passes (the chain is consistent).
    off = verify_agent(store, "m", repair=False, anchor=False)
    assert off.ok, off.message


def test_a_log_cut_after_an_earlier_change_fails(store: MemoryStore, tmp_path: Path,
                                                  store_factory: StoreFactory) -> None:
    """Dropping the last change's lines (the chain stays intact): the store's last
    change is not in the log.  On PostgreSQL another worker's log may hold it, so
    verify can only say it did not check it (docs/reliability.md)."""
    log = tmp_path / ".rotifer" / "audit.jsonl"
    rewrite(log, lambda lines: lines.pop())
    report = verify_agent(store, "m", repair=False)
    if store_factory.backend == "sqlite":
        assert not report.ok and "has no line of it" in report.message, report.message
    else:
        assert report.ok and "anchor not checked here" in report.message, report.message


def set_head(store_factory: StoreFactory, head: str) -> None:
    url = store_factory.url()
    if url.startswith("sqlite:"):
        with sqlite3.connect(url[len("sqlite:"):]) as conn:
            conn.execute("UPDATE memory_agents SET head = ?", (head,))
        return
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE memory_agents SET head = %s", (head,))


def test_a_forger_who_also_rewrites_the_store_is_not_caught(
        store: MemoryStore, store_factory: StoreFactory, tmp_path: Path) -> None:
    """What docs/reliability.md says the anchor cannot do: an attacker who can
    write the store too sets its head to the forged chain's end."""
    if store_factory.backend != "sqlite":
        pytest.skip("PostgreSQL replays its own copy of the lines: see the next test")
    log = tmp_path / ".rotifer" / "audit.jsonl"
    rewrite(log, forge_actor)
    last = log.read_bytes().splitlines()[-1]
    import hashlib

    set_head(store_factory, hashlib.sha256(last).hexdigest())
    assert verify_agent(store, "m", repair=False).ok


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_replays_its_own_copy_not_the_forged_file(
        store: MemoryStore, store_factory: StoreFactory, tmp_path: Path) -> None:
    """On PostgreSQL the history replayed is ``memory_audit``'s: a forged actor in
    the file changes nothing ``show`` or the replay sees."""
    from rotifer.memory.audit.history import audit_history

    log = tmp_path / ".rotifer" / "audit.jsonl"
    rewrite(log, forge_actor)
    assert not verify_agent(store, "m", repair=False).ok
    assert [x["actor"] for x in audit_history(store, "m") if x["action"] == "update"] == [A]
