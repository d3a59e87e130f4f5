"""``audit verify`` of one agent reads that agent's own lines, found by the
history index, and still catches every edit of them however many lines other
agents wrote around them; an index it cannot trust (missing, stale, rows
without a digest) makes it read the whole log and rebuild the index."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from rotifer.memory import MemoryStore
from rotifer.memory.audit.history import audit_history
from rotifer.memory.audit.read import Scan
from rotifer.memory.audit.verify import verify_agent

from .helpers import crowded as crowded_on
from .helpers import gene_id, rows_of

OWN = "found by the history index"
WHOLE = "hash chain intact over"


def crowded(root: Path, others: int = 300) -> tuple[MemoryStore, Path]:
    """Agent ``a`` with 12 changes among ``others`` of agent ``b``, on SQLite."""
    return crowded_on(lambda rot, **kw: MemoryStore.open(rot, url=f"sqlite:{root / 'm.db'}", **kw),
                      root, others)


def rechain_next(rows: list[bytes], n: int) -> None:
    """A careful forger: after editing line ``n``, make line ``n + 1`` name its new
    hash, so the break moves on to a line of another agent."""
    after = json.loads(rows[n + 1])
    after["prev"] = hashlib.sha256(rows[n]).hexdigest()
    rows[n + 1] = json.dumps(after, separators=(",", ":"), ensure_ascii=False).encode()


def verify_reading(store: MemoryStore, agent: str, **kw: object) -> tuple[str, bool, int]:
    """(message, ok, bytes the verify read as its progress said)."""
    seen = [Scan()]
    report = verify_agent(store, agent, progress=lambda s: seen.append(s), **kw)  # type: ignore[arg-type]
    return report.message, report.ok, seen[-1].done


def test_verify_of_one_agent_reads_its_own_lines(tmp_path: Path) -> None:
    store, log = crowded(tmp_path)
    with store:
        size = log.stat().st_size
        raw = log.read_bytes().splitlines(keepends=True)
        own = sum(len(raw[n]) for n in rows_of(log, "a"))
        message, ok, read = verify_reading(store, "a")
        assert ok and OWN in message, message
        # a's own lines, the line before each (its link) and the few after its
        # last one: a fraction of the log
        mine = rows_of(log, "a")
        before = sum(len(raw[n - 1]) for n in mine if n and n - 1 not in mine)
        assert own + before <= read < own + before + size // 10, (own, read, size)
        message, ok, read = verify_reading(store, "a", full=True)
        assert ok and WHOLE in message and read == size, message


@pytest.mark.parametrize("careful", [False, True])
def test_an_edited_line_of_the_agent_is_caught_among_many_others(tmp_path: Path,
                                                                 careful: bool) -> None:
    """A same-length edit of one of a's lines in the middle of b's many lines,
    with the next line left alone or re-chained to it (the break then lies
    between two lines of b, which a's verify never reads)."""
    store, log = crowded(tmp_path)
    with store:
        rows = log.read_bytes().splitlines()
        n = rows_of(log, "a")[5]
        assert json.loads(rows[n + 1])["agent"] == "b"
        edited = json.loads(rows[n])
        assert edited["actor"] == gene_id("ga")
        forged = rows[n].replace(gene_id("ga").encode(), gene_id("gx").encode())
        assert len(forged) == len(rows[n]) and forged != rows[n]
        rows[n] = forged
        if careful:
            rechain_next(rows, n)
        log.write_bytes(b"".join(r + b"\n" for r in rows))
        # The index still finds the line where it was and serves it (its row
        # names only the place, action, number and key): the readers alone
        # would show the forged actor ...
        shown = [line for line in audit_history(store, "a") if line["ts"] == edited["ts"]]
        assert shown and shown[0]["actor"] == gene_id("gx")
        # ... but verify hashes each of a's lines against the digest the store
        # committed with it, and reads the whole log to say where.
        message, ok, _ = verify_reading(store, "a", repair=False)
        assert not ok, message
        where = n + 3 if careful else n + 2  # 1-based: the first line that no longer links
        assert f"audit.jsonl line {where}: broken hash chain" in message, message


def digests(db: Path, agent: str) -> list[object]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute(
            "SELECT digest FROM memory_audit_index WHERE agent_id = ? ORDER BY file_no, off",
            (agent,))]


def test_rows_without_a_digest_are_rebuilt_from_the_whole_log(tmp_path: Path) -> None:
    """Rows as a rotifer before the digest column wrote them: verify reads the
    whole log, fills them in, and the next verify reads a's lines alone."""
    store, log = crowded(tmp_path, others=120)
    db = tmp_path / "m.db"
    with store:
        built = digests(db, "a")
        assert built and all(isinstance(d, bytes) and len(d) == 32 for d in built)
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE memory_audit_index SET digest = NULL WHERE agent_id = 'a'")
        message, ok, read = verify_reading(store, "a")
        assert ok and WHOLE in message and read == log.stat().st_size, message
        assert digests(db, "a") == built
        message, ok, _ = verify_reading(store, "a")
        assert ok and OWN in message, message


def test_a_missing_or_stale_index_is_rebuilt(tmp_path: Path) -> None:
    store, log = crowded(tmp_path, others=120)
    db = tmp_path / "m.db"
    query = "SELECT * FROM memory_audit_index WHERE agent_id = 'a' ORDER BY file_no, off"
    with store:
        with sqlite3.connect(db) as conn:
            built = conn.execute(query).fetchall()
        for damage in ("DELETE FROM memory_audit_index WHERE agent_id = 'a'",
                       "UPDATE memory_audit_index SET off = off + 1 WHERE agent_id = 'a'",
                       "UPDATE memory_audit_index SET digest = zeroblob(32) "
                       "WHERE agent_id = 'a'"):
            with sqlite3.connect(db) as conn:
                conn.execute(damage)
            message, ok, read = verify_reading(store, "a")
            assert ok and WHOLE in message and read == log.stat().st_size, (damage, message)
            with sqlite3.connect(db) as conn:
                assert conn.execute(query).fetchall() == built, damage
            message, ok, _ = verify_reading(store, "a")
            assert ok and OWN in message, (damage, message)


def test_the_log_after_the_agents_last_line_is_searched_only_so_far(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change of ``a`` that never committed leaves lines after its last indexed
    one, which verify marks ``rolled_back``.  An agent idle while others wrote a
    lot would pay for all their lines to look for one, so only the first
    ``TAIL_SEARCH`` bytes after its last line are searched (lowered here), and
    the report says so; ``full`` searches everything and marks it."""
    from rotifer.memory.audit import own

    store, log = crowded(tmp_path, others=120)
    with store:
        b = store.for_gene("b", gene_id("gb"), "d")
        for i in range(40):  # b's lines after a's last one
            b.write_memory(f"d/late{i}", b"w" * 30, "CONTEXT")
        rows = log.read_bytes().splitlines()
        last_a = json.loads(rows[rows_of(log, "a")[-1]])
        ghost = {"ts": "2030-01-01T00:00:00.000000Z", "agent": "a", "action": "write",
                 "key": "d/ghost", "category": "CACHE", "actor": gene_id("ga"), "bytes": 9,
                 "entryId": None, "epoch": last_a["epoch"], "seq": last_a["seq"] + 1,
                 "prev": hashlib.sha256(rows[-1]).hexdigest()}
        with log.open("ab") as f:  # a writer of a's killed after its append
            f.write(json.dumps(ghost, separators=(",", ":")).encode() + b"\n")
        after = sum(len(r) + 1 for r in rows[rows_of(log, "a")[-1] + 1:])
        monkeypatch.setattr(own, "TAIL_SEARCH", after // 4)
        monkeypatch.setattr(own, "BLOCK", 512)
        message, ok, read = verify_reading(store, "a")
        assert ok and OWN in message and "searched that far" in message, message
        assert read < log.stat().st_size - after // 2  # it stopped early
        report = verify_agent(store, "a", full=True)
        assert report.ok and report.repaired == 1, report.message
        monkeypatch.setattr(own, "TAIL_SEARCH", 16 << 20)  # now it searches all of it
        message, ok, _ = verify_reading(store, "a")
        assert ok and OWN in message and "searched that far" not in message, message
        marked = [json.loads(r) for r in log.read_bytes().splitlines()
                  if b'"rolled_back"' in r]
        assert [(m["agent"], m["seq"]) for m in marked] == [("a", ghost["seq"])]


def test_a_change_that_never_committed_after_the_agents_last_line_is_marked(
        tmp_path: Path) -> None:
    """Within the searched part: verify reads the whole log and marks it."""
    store, log = crowded(tmp_path, others=120)
    with store:
        rows = log.read_bytes().splitlines()
        last_a = json.loads(rows[rows_of(log, "a")[-1]])
        ghost = {"ts": "2030-01-01T00:00:00.000000Z", "agent": "a", "action": "delete",
                 "key": "d/k0", "category": "PATTERN", "actor": gene_id("ga"), "bytes": 0,
                 "entryId": None, "epoch": last_a["epoch"], "seq": last_a["seq"] + 1,
                 "prev": hashlib.sha256(rows[-1]).hexdigest()}
        with log.open("ab") as f:
            f.write(json.dumps(ghost, separators=(",", ":")).encode() + b"\n")
        report = verify_agent(store, "a")
        assert report.ok and report.repaired == 1 and WHOLE in report.message, report.message
        message, ok, _ = verify_reading(store, "a")
        assert ok and OWN in message, message
