"""The history index (issue 31, item 7): each agent's audit lines found without
reading the shared log, kept right by every way lines reach the log.

Every test compares what the readers give with the index (``audit show``'s
:func:`audit_history`, the chart's :func:`usage_steps`) against what they give
reading the whole log -- the same store with the index's marker for the agent
removed, which is what a store without an index is -- and checks the index
was really used (or really not: after a move, an import, a stale row) where it
should be.  ``audit verify`` builds an agent's rows again from the log.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rotifer.memory import AgentMemoryError, ManualClock, MemoryStore
from rotifer.memory.audit.history import audit_history, usable_entries, usage_steps
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.transfer import export_agent, import_agent, move_agent

from .conftest import StoreFactory
from .helpers import gene_id

G1, G2 = gene_id("g1"), gene_id("g2")


def indexed(store: MemoryStore, agent: str) -> bool:
    """Would the readers use the index for ``agent`` now?"""
    with store.backend.read() as tx:
        return usable_entries(tx, store.audit.path, agent, tx.get_agent(agent)) is not None


def drop_marker(store: MemoryStore, agent: str) -> None:
    """Make the store forget that its index is whole for ``agent``."""
    with store.backend.write(agent) as tx:
        tx.set_indexed(agent, "(none)", False)


def readings(store: MemoryStore, agent: str) -> dict[str, Any]:
    """Everything the readers say about ``agent``, with several filters."""
    out: dict[str, Any] = {
        "all": list(audit_history(store, agent)),
        "rolled": list(audit_history(store, agent, rolled_back=True)),
        "newest": list(audit_history(store, agent, limit=3, rolled_back=True)),
        "actor": list(audit_history(store, agent, actor=G2)),
        "chart": [(at, code, size) for at, code, _, size in usage_steps(store, agent)],
    }
    keys = sorted({str(line["key"]) for line in out["all"] if line.get("key")})
    for key in keys[:3]:
        out[f"key {key}"] = list(audit_history(store, agent, key=key, limit=2))
    if out["all"]:
        middle = out["all"][len(out["all"]) // 2]["ts"]
        from rotifer.memory.clock import parse_time
        out["since"] = list(audit_history(store, agent, since_us=parse_time(middle)))
    return out


def same_with_and_without(store: MemoryStore, agent: str, *, expect_index: bool = True
                          ) -> dict[str, Any]:
    """The readers' answers from the index and from the whole log, which must agree."""
    assert indexed(store, agent) is expect_index
    fast = readings(store, agent)
    with store.backend.read() as tx:
        marker = tx.indexed(agent)
    assert marker is not None
    drop_marker(store, agent)
    assert not indexed(store, agent)
    slow = readings(store, agent)
    with store.backend.write(agent) as tx:
        tx.set_indexed(agent, *marker)
    assert fast == slow
    return fast


def churn(store: MemoryStore, agent: str, clock: ManualClock, ops: list[tuple[int, int, int]]
          ) -> None:
    """Writes, updates, deletes, evictions (small quota), refusals, by two genes."""
    genes = [store.for_gene(agent, G1, "d"), store.for_gene(agent, G2, "d")]
    categories = ["CACHE", "PATTERN", "CONTEXT", "PREFERENCE"]
    for kind, key, size in ops:
        clock.advance(seconds=1)
        memory = genes[key % 2]
        name = f"d/k{key}"
        try:
            if kind < 6:
                memory.write_memory(name, b"v" * size, categories[(key + kind) % 4])
            elif kind < 8:
                memory.delete_memory(name)
            elif kind == 8:
                store.deployer(agent).delete_key(name)
            else:
                memory.write_memory(name, b"v" * 5000, "CACHE")  # over the quota: refused
        except AgentMemoryError:
            pass


OPS = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 11), st.integers(0, 120)),
               min_size=1, max_size=60)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, other=OPS)
def test_readers_agree_with_and_without_the_index(tmp_path_factory: pytest.TempPathFactory,
                                                  ops: list[tuple[int, int, int]],
                                                  other: list[tuple[int, int, int]]) -> None:
    """Any mix of changes of two agents sharing the log: the index gives what the
    whole log gives, for every filter the pages and ``audit show`` use."""
    root = tmp_path_factory.mktemp("idx")
    clock = ManualClock("2026-03-01T12:00:00Z")
    with MemoryStore.open(root / ".rotifer", url=f"sqlite:{root / 'm.db'}", clock=clock) as store:
        store.create_agent("m", quota_bytes=600)
        store.create_agent("o", quota_bytes=600)
        for i in range(max(len(ops), len(other))):
            churn(store, "m", clock, ops[i:i + 1])
            churn(store, "o", clock, other[i:i + 1])
        same_with_and_without(store, "m")
        same_with_and_without(store, "o")


def test_both_backends_keep_the_index_with_every_change(store_factory: StoreFactory, rot: Path,
                                                        clock: ManualClock) -> None:
    """SQLite and PostgreSQL: evictions, refusals outside a change, an export, a
    drop and a new memory of the same name."""
    store = store_factory(rot, clock=clock)
    store.create_agent("m", quota_bytes=500)
    churn(store, "m", clock, [(k % 6, k % 9, 40 + k % 50) for k in range(80)])
    store.refuse_outside("m", "read", "not allowed here", key="d/k1", actor=G1)
    export_agent(store, "m", rot.parent / "m.json")
    lines = same_with_and_without(store, "m")["rolled"]
    # PostgreSQL's history is its own copy of the committed lines (memory_audit);
    # the lines outside a change are the local log's, shown from SQLite's.
    outside = {"access_denied", "export"} if store_factory.backend == "sqlite" else set()
    assert {"evict", "write", *outside} <= {x["action"] for x in lines}
    store.drop_agent("m")
    store.create_agent("m", quota_bytes=500)
    churn(store, "m", clock, [(0, 1, 10), (0, 2, 20)])
    after = same_with_and_without(store, "m")["all"]
    assert [x["action"] for x in after] == ["write", "write"]  # the old memory is not its history


def test_rotation_keeps_the_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ROTIFER_AUDIT_MAX_BYTES small: the log rolls over many times; the rows name
    the files the lines are in now (``audit.jsonl.N``) and read back right."""
    monkeypatch.setenv("ROTIFER_AUDIT_MAX_BYTES", "4000")
    clock = ManualClock("2026-03-01T12:00:00Z")
    rot = tmp_path / ".rotifer"
    with MemoryStore.open(rot, url=f"sqlite:{tmp_path / 'm.db'}", clock=clock) as store:
        store.create_agent("m", quota_bytes=900)
        store.create_agent("o")
        for i in range(60):
            churn(store, "m", clock, [(i % 7, i % 5, 30 + i)])
            churn(store, "o", clock, [(0, i, 3)])
        assert len(list(rot.glob("audit.jsonl.*"))) >= 5
        same_with_and_without(store, "m")
        assert verify_agent(store, "m").ok


def test_a_move_and_an_import_are_read_whole_until_verify_indexes_them(
        tmp_path: Path) -> None:
    """The lines from before a move or an import were indexed by another store:
    the new store's readers read the whole log until ``audit verify`` builds the
    agent's rows from it -- the same answers either way."""
    clock = ManualClock("2026-03-01T12:00:00Z")
    rot = tmp_path / ".rotifer"
    a = MemoryStore.open(rot, url=f"sqlite:{tmp_path / 'a.db'}", clock=clock)
    b = MemoryStore.open(rot, url=f"sqlite:{tmp_path / 'b.db'}", clock=clock)
    c = MemoryStore.open(rot, url=f"sqlite:{tmp_path / 'c.db'}", clock=clock)
    try:
        a.create_agent("m", quota_bytes=700)
        churn(a, "m", clock, [(k % 6, k % 7, 20 + k) for k in range(30)])
        before = list(audit_history(a, "m"))
        move_agent(a, b, "m")
        churn(b, "m", clock, [(0, 3, 9), (6, 3, 0)])
        assert not indexed(b, "m")
        whole = list(audit_history(b, "m"))
        assert [x for x in whole if x in before] == before  # the history before the move
        assert verify_agent(b, "m").ok
        assert list(audit_history(b, "m")) == whole
        same_with_and_without(b, "m")

        export_agent(b, "m", tmp_path / "m.json")
        import_agent(c, tmp_path / "m.json")
        churn(c, "m", clock, [(0, 8, 5)])
        assert not indexed(c, "m")
        assert verify_agent(c, "m").ok
        same_with_and_without(c, "m")
    finally:
        for store in (a, b, c):
            store.close()


def test_verify_rebuilds_a_deleted_or_stale_index(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-01T12:00:00Z")
    db = tmp_path / "m.db"
    with MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{db}", clock=clock) as store:
        store.create_agent("m", quota_bytes=500)
        churn(store, "m", clock, [(k % 8, k % 6, 30 + k) for k in range(40)])
        truth = readings(store, "m")
        with sqlite3.connect(db) as conn:  # the rows deleted: behind the store
            conn.execute("DELETE FROM memory_audit_index WHERE agent_id = 'm'")
        assert not indexed(store, "m")
        assert readings(store, "m") == truth
        assert verify_agent(store, "m").ok
        assert indexed(store, "m")
        assert readings(store, "m") == truth
        rows = "SELECT * FROM memory_audit_index WHERE agent_id = 'm' ORDER BY file_no, off"
        with sqlite3.connect(db) as conn:  # every place off by one byte: stale
            built = conn.execute(rows).fetchall()
            conn.execute("UPDATE memory_audit_index SET off = off + 1 WHERE agent_id = 'm'")
        assert indexed(store, "m")  # the rows look whole; the lines read say otherwise
        assert readings(store, "m") == truth
        assert verify_agent(store, "m").ok
        assert readings(store, "m") == truth
        with sqlite3.connect(db) as conn:
            assert conn.execute(rows).fetchall() == built  # the places are right again


WRITER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from rotifer.memory import MemoryStore
    from rotifer.memory.storage.sqlite.transaction import SqliteTransaction

    root, gene = Path(sys.argv[1]), sys.argv[2]
    update_agent = SqliteTransaction.update_agent

    def dies_before_commit(self, agent_id, *args, **kwargs):
        # The change's lines are in the log and its index rows in this
        # transaction: the process ends here, before the commit.
        if (root / "die").exists():
            os.kill(os.getpid(), signal.SIGKILL)
        return update_agent(self, agent_id, *args, **kwargs)

    SqliteTransaction.update_agent = dies_before_commit
    store = MemoryStore.open(root / ".rotifer", url=f"sqlite:{root / 'm.db'}")
    memory = store.for_gene("m", gene, "d")
    for i in range(int(sys.argv[3])):
        memory.write_memory(f"d/k{i % 5}", b"v" * (10 + i), "CONTEXT")
    (root / "die").touch()
    memory.write_memory("d/never", b"x", "CONTEXT")
""")


@contextmanager
def opened(root: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(root / ".rotifer", url=f"sqlite:{root / 'm.db'}") as store:
        yield store


def test_a_writer_killed_between_its_append_and_its_commit(tmp_path: Path) -> None:
    """A real process killed with SIGKILL after its lines reached the log and
    before its commit: its index rows went with its transaction.  The readers
    agree with the whole log before and after ``verify`` marks the change
    rolled back, and the next change of the agent goes on indexed."""
    with opened(tmp_path) as store:
        store.create_agent("m")
    for _ in range(2):
        (tmp_path / "die").unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), G1, "7"],
                              capture_output=True, check=False, timeout=120)
        assert done.returncode == -signal.SIGKILL, done.stderr
    log = (tmp_path / ".rotifer" / "audit.jsonl").read_text()
    assert log.count('"d/never"') == 2  # logged twice, never committed
    with opened(tmp_path) as store:
        shown = same_with_and_without(store, "m")
        assert all(x["key"] != "d/never" for x in shown["rolled"])
        assert verify_agent(store, "m").ok
        after = same_with_and_without(store, "m")
        assert any(x["action"] == "rolled_back" for x in after["rolled"])
        store.for_gene("m", G1, "d").write_memory("d/later", b"y", "CONTEXT")
        assert same_with_and_without(store, "m")["all"][0]["key"] == "d/later"
    assert os.path.exists(tmp_path / "m.db")


def test_a_store_upgraded_from_version_3_is_read_whole_until_verify(tmp_path: Path) -> None:
    """A file of schema version 3 (no index tables): commands that only use
    memory refuse it as for every earlier step; opening it as ``rotifer init``
    does adds the tables; its agents have no marker, so the readers read the
    whole log, until ``audit verify`` builds their rows."""
    clock = ManualClock("2026-03-01T12:00:00Z")
    db, rot = tmp_path / "m.db", tmp_path / ".rotifer"
    with MemoryStore.open(rot, url=f"sqlite:{db}", clock=clock) as store:
        store.create_agent("m", quota_bytes=500)
        churn(store, "m", clock, [(k % 8, k % 6, 30 + k) for k in range(30)])
        truth = readings(store, "m")
    with sqlite3.connect(db) as conn:  # back to version 3, as an older rotifer left it
        conn.execute("DROP TABLE memory_audit_index")
        conn.execute("DROP TABLE memory_audit_indexed")
        conn.execute("PRAGMA user_version = 3")
    with pytest.raises(AgentMemoryError, match="run `rotifer init`"):
        MemoryStore.open(rot, url=f"sqlite:{db}", clock=clock, create=False)
    with MemoryStore.open(rot, url=f"sqlite:{db}", clock=clock) as store:  # as init opens it
        assert not indexed(store, "m")
        assert readings(store, "m") == truth
        assert verify_agent(store, "m").ok
        assert indexed(store, "m")
        assert readings(store, "m") == truth


def test_a_time_window_reads_the_same(tmp_path: Path) -> None:
    """``since_us`` and ``until_us`` (the console's history filter) from the index
    and from the whole log."""
    from rotifer.memory.clock import parse_time

    clock = ManualClock("2026-03-01T12:00:00Z")
    with MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / 'm.db'}",
                          clock=clock) as store:
        store.create_agent("m", quota_bytes=500)
        churn(store, "m", clock, [(k % 8, k % 6, 30 + k) for k in range(40)])
        times = [parse_time(x["ts"]) for x in audit_history(store, "m")]
        lo, hi = times[-10], times[5]

        def window() -> list[list[dict[str, Any]]]:
            return [list(audit_history(store, "m", since_us=lo, until_us=hi)),
                    list(audit_history(store, "m", until_us=hi, limit=4, rolled_back=True))]

        fast = window()
        assert indexed(store, "m") and len(fast[0]) == len(times) - 15
        drop_marker(store, "m")
        assert window() == fast
