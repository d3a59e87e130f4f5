"""Moving an agent's memory: export, import and move, on real SQLite files and
the real PostgreSQL server of ``tests/pg_plugin.py`` (issue 5).

The seed: PREFERENCE, PATTERN and CONTEXT go with the agent "with their access
policies, retention policies and createdBy unchanged"; CACHE may stay behind.
Every failure path leaves the source as it was and the destination without
the agent.  Failures are real: a trigger in the destination database that
refuses one row, an audit log that cannot be appended to.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rotifer.memory import (
    AgentMemoryError,
    Category,
    DataPolicy,
    ErrorCode,
    ManualClock,
    MemoryStore,
)
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.storage.backend import Row
from rotifer.memory.transfer import (
    FORMAT,
    check_export,
    export_agent,
    import_agent,
    move_agent,
    read_export,
)

from .conftest import SchemaMaker
from .helpers import audit_lines, code_of, gene_id

A, B, C = gene_id("fmt-1"), gene_id("net-1"), gene_id("fmt-2")
PG = pytest.mark.postgres
#: Both directions between the two backends (the issue's point), and each
#: backend to itself.
DIRECTIONS = [pytest.param("sqlite", "postgres", id="sqlite-to-postgres", marks=PG),
              pytest.param("postgres", "sqlite", id="postgres-to-sqlite", marks=PG)]
PAIRS = [*DIRECTIONS, pytest.param("sqlite", "sqlite", id="sqlite-to-sqlite"),
         pytest.param("postgres", "postgres", id="postgres-to-postgres", marks=PG)]
KINDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=PG)]

PRIVATE_TO_CREATOR = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
                      "sharePolicy": "PRIVATE"}
SHARED = {"readScope": "ALL_GENES", "writeScope": "SAME_DOMAIN",
          "sharePolicy": "ANONYMIZED_SHARE"}
WEEK = {"maxRetentionDays": 7, "autoDeleteOnTermination": True, "anonymizationSupported": True}
DAY = {"maxRetentionDays": 1, "autoDeleteOnTermination": False, "anonymizationSupported": False}


@dataclass
class Side:
    """One end of a move: a store, its audit folder, its URL and backend kind."""

    kind: str
    store: MemoryStore
    rot: Path
    url: str

    def lines(self) -> list[dict[str, Any]]:
        return audit_lines(self.rot)

    def actions(self) -> list[str]:
        return [line["action"] for line in self.lines()]


@pytest.fixture
def side(tmp_path: Path, clock: ManualClock, request: pytest.FixtureRequest
         ) -> Iterator[Callable[[str, str], Side]]:
    """``side(kind, name)``: a store on a new SQLite file or PostgreSQL schema,
    with its own ``.rotifer`` folder (so each side's audit log is separate)."""
    opened: list[MemoryStore] = []
    schemas: list[str] = []
    maker: list[SchemaMaker] = []

    def make(kind: str, name: str) -> Side:
        rot = tmp_path / name / ".rotifer"
        if kind == "sqlite":
            url = f"sqlite:{rot / 'playground.db'}"
        else:
            if not maker:
                maker.append(request.getfixturevalue("pg_schemas"))
            schema, url = maker[0].new()
            schemas.append(schema)
        store = MemoryStore.open(rot, url=url, clock=clock)
        opened.append(store)
        return Side(kind, store, rot, url)

    yield make
    for store in opened:
        store.close()
    for schema in schemas:
        maker[0].drop(schema)


def populate(store: MemoryStore, clock: ManualClock) -> None:
    """An agent with every category, policies of every kind, two domains, an
    updated entry, a read by a third gene, and two CACHE entries written in the
    same microsecond (so only the write order tells them apart)."""
    store.create_agent("bot", quota_bytes=4096,
                       data_policy=DataPolicy(max_retention_days=30, anonymization_supported=True))
    fmt, net = store.for_gene("bot", A, "formatter"), store.for_gene("bot", B, "network")
    fmt.write_memory("formatter/indent", b"4", "PREFERENCE")
    fmt.write_memory("formatter/secret", b"\x00\xff binary", "PREFERENCE", PRIVATE_TO_CREATOR)
    clock.advance(seconds=1)
    net.write_memory("network/seen", b"x" * 10, "PATTERN", SHARED, retention_policy=WEEK)
    net.write_memory("network/ctx", "значение".encode(), "CONTEXT")
    net.write_memory("network/ctx-null", b"n", "CONTEXT", retention_policy=None)
    fmt.write_memory("formatter/c1", b"c" * 100, "CACHE")
    fmt.write_memory("formatter/c2", b"c" * 100, "CACHE")
    clock.advance(seconds=1)
    fmt.write_memory("formatter/indent", b"2", "PREFERENCE")  # createdAt != updatedAt now
    store.for_gene("bot", C, "formatter").read_memory("formatter/indent")  # lastAccessedBy
    store.create_agent("other")  # another agent in the source: never touched
    store.for_gene("other", A, "formatter").write_memory("formatter/x", b"o", "PREFERENCE")


def newest_first(entries: list[Row]) -> list[Row]:
    """The order a store lists entries in (and a transfer writes them)."""
    return sorted(entries, key=lambda r: (r.updated_us, r.seq), reverse=True)


def rows(store: MemoryStore, agent: str = "bot") -> list[Row]:
    """Every stored field of the agent's entries, in write order."""
    with store.backend.read() as tx:
        return sorted(tx.iter_newest(agent), key=lambda r: r.seq)


def state(store: MemoryStore, agent: str = "bot") -> tuple[Any, ...]:
    """Everything an agent's memory consists of: settings, counters, rows."""
    return store.agent_record(agent), rows(store, agent)


def same(now: tuple[Any, ...], before: tuple[Any, ...], changes: int) -> bool:
    """The same memory, ``changes`` changes later (each move and import is a
    numbered change of the agent, timed after the ones before it)."""
    (record, entries), (was, was_entries) = now, before
    # A moved memory is a new memory of the agent (a new epoch) with its own anchor.
    return (entries == was_entries and record.next_seq == was.next_seq + changes
            and record.last_us > was.last_us and record.epoch != was.epoch
            and record._replace(next_seq=0, last_us=0, epoch="", head="")
            == was._replace(next_seq=0, last_us=0, epoch="", head=""))


def rolled_back_move(side: Side, before: list[dict[str, Any]]) -> None:
    """Since issue 22 a move logs the source's change (N) before the destination's
    import (N + 1): a move that fails after that leaves exactly that change in the
    source's log, marked rolled_back, and the log still verifies."""
    added = side.lines()[len(before):]
    assert added[0]["action"] == "move" and added[-1]["action"] == "rolled_back"
    assert {x["seq"] for x in added} == {added[0]["seq"]}
    assert verify_agent(side.store, "bot").ok


# -- moving ----------------------------------------------------------------------

@pytest.mark.parametrize("src_kind, dst_kind", PAIRS)
def test_move_carries_everything_but_cache_unchanged(side: Callable[[str, str], Side],
                                                     clock: ManualClock, src_kind: str,
                                                     dst_kind: str) -> None:
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    record, before = state(src.store)
    other = state(src.store, "other")
    listed = [e.to_json() for e in src.store.deployer("bot").list()
              if e.category is not Category.CACHE]
    report = move_agent(src.store, dst.store, "bot")

    carried = [r for r in before if r.category is not Category.CACHE]
    moved_record, moved = state(dst.store)
    assert moved == carried  # ids, values, createdBy, lastAccessedBy, times, policies, order
    assert {r.category for r in carried} == {Category.PREFERENCE, Category.PATTERN,
                                             Category.CONTEXT}
    size = sum(r.size for r in carried)
    assert moved_record.quota_bytes == 4096 and moved_record.used_bytes == size
    assert moved_record.data_policy == record.data_policy
    # The move is the source's change N, the import the destination's change N + 1.
    assert moved_record.next_seq == record.next_seq + 2
    assert [e.to_json() for e in dst.store.deployer("bot").list()] == listed
    assert dst.store.usage("bot") == (size, 4096)
    # The agent lives in one place: gone from the source, the other agent untouched.
    assert not src.store.has_agent("bot")
    assert code_of(lambda: src.store.for_gene("bot", A, "formatter")) is ErrorCode.STORAGE_ERROR
    assert state(src.store, "other") == other
    assert (report.entries, report.bytes, report.left_behind) == (len(carried), size, 2)
    assert report.counts == {"PREFERENCE": 2, "PATTERN": 1, "CONTEXT": 2, "CACHE": 0}


@pytest.mark.parametrize("src_kind, dst_kind", DIRECTIONS)
def test_round_trip_there_and_back(side: Callable[[str, str], Side], clock: ManualClock,
                                   src_kind: str, dst_kind: str) -> None:
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    before = state(src.store)
    move_agent(src.store, dst.store, "bot", keep_cache=True)
    assert same(state(dst.store), before, changes=2)  # the move and the import
    move_agent(dst.store, src.store, "bot", keep_cache=True)
    assert same(state(src.store), before, changes=4)
    assert not dst.store.has_agent("bot")


@pytest.mark.parametrize("src_kind, dst_kind", DIRECTIONS)
def test_the_rules_hold_at_the_destination(side: Callable[[str, str], Side],
                                           clock: ManualClock, src_kind: str,
                                           dst_kind: str) -> None:
    """Scopes still see the creator and its domain; expiry comes when it would
    have; cleanup still goes oldest first, ties in write order."""
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    move_agent(src.store, dst.store, "bot", keep_cache=True)
    fmt, other_fmt = dst.store.for_gene("bot", A, "formatter"), \
        dst.store.for_gene("bot", C, "formatter")
    net = dst.store.for_gene("bot", B, "network")
    assert fmt.read_memory("formatter/secret").value == b"\x00\xff binary"  # type: ignore[union-attr]
    assert code_of(lambda: other_fmt.read_memory("formatter/secret")) is ErrorCode.ACCESS_DENIED
    assert other_fmt.read_memory("formatter/indent").value == b"2"  # type: ignore[union-attr]
    assert code_of(lambda: net.read_memory("formatter/indent")) is ErrorCode.ACCESS_DENIED
    assert fmt.read_memory("network/seen") is not None  # ALL_GENES
    # Only the creator may change the policies, as before the move.
    assert code_of(lambda: other_fmt.write_memory("formatter/indent", b"3", "PREFERENCE",
                                                  PRIVATE_TO_CREATOR)) is ErrorCode.ACCESS_DENIED
    # Cleanup: c1 was written (1 us) before c2, so it goes first.
    used, quota = dst.store.usage("bot")
    fmt.write_memory("formatter/big", b"b" * (quota - used + 50), "CONTEXT")
    assert [e.key for e in dst.store.deployer("bot").list("CACHE")] == ["formatter/c2"]
    assert [line["key"] for line in dst.lines() if line["action"] == "evict"] == ["formatter/c1"]
    # network/seen (written 1 s before the clock's "now") keeps 7 days from that update;
    # network/ctx follows the agent's 30-day policy.
    clock.advance(days=7, seconds=-2)
    assert net.read_memory("network/seen") is not None
    clock.advance(seconds=1)
    assert net.read_memory("network/seen") is None
    clock.advance(days=23, micros=1)  # ctx was written 1 us after seen
    assert net.read_memory("network/ctx") is None


@pytest.mark.parametrize("src_kind, dst_kind", DIRECTIONS)
def test_keep_cache_carries_cache_too(side: Callable[[str, str], Side], clock: ManualClock,
                                      src_kind: str, dst_kind: str) -> None:
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    before = rows(src.store)
    report = move_agent(src.store, dst.store, "bot", keep_cache=True)
    assert rows(dst.store) == before
    assert report.left_behind == 0 and report.counts["CACHE"] == 2
    assert "move_drop" not in src.actions()


def test_cache_left_behind_is_audited_and_expired_entries_are_not_carried(
        side: Callable[[str, str], Side], clock: ManualClock) -> None:
    src, dst = side("sqlite", "src"), side("sqlite", "dst")
    populate(src.store, clock)
    src.store.for_gene("bot", A, "formatter").write_memory("formatter/brief", b"v", "CONTEXT",
                                                           retention_policy=DAY)
    clock.advance(days=1, micros=10)  # past brief's time (writes at one clock reading
    move_agent(src.store, dst.store, "bot")   # get consecutive microseconds)
    assert [r.key for r in rows(dst.store)] == [
        "formatter/secret", "network/seen", "network/ctx", "network/ctx-null",
        "formatter/indent"]
    lines = src.lines()
    dropped = [(line["action"], line["key"]) for line in lines if line["action"] in
               ("expire", "move_drop")]
    # Lines of one change list its entries as the store does: most recently updated first.
    assert dropped[0] == ("expire", "formatter/brief")
    assert sorted(dropped[1:]) == [("move_drop", "formatter/c1"), ("move_drop", "formatter/c2")]


@pytest.mark.parametrize("src_kind, dst_kind", DIRECTIONS)
def test_move_is_audited_on_both_sides(side: Callable[[str, str], Side], clock: ManualClock,
                                       src_kind: str, dst_kind: str) -> None:
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    carried = [r for r in rows(src.store) if r.category is not Category.CACHE]
    start = len(src.lines())
    report = move_agent(src.store, dst.store, "bot")

    out = src.lines()[start:]
    assert [line["action"] for line in out] == ["move"] + ["move_out"] * 5 + ["move_drop"] * 2
    head = out[0]
    assert (head["agent"], head["actor"], head["entries"], head["bytes"], head["sha256"],
            head["keepCache"], head["leftBehind"]) == (
        "bot", "deployer", 5, report.bytes, report.sha256, False, 2)
    assert head["to"].startswith(dst_kind.replace("postgres", "postgresql") + ":")
    assert [line["key"] for line in out[1:6]] == [r.key for r in newest_first(carried)]
    assert all(line["actor"] == "deployer" and line["agent"] == "bot" for line in out)
    assert all({"ts", "agent", "action", "key", "category", "actor", "bytes"} <= set(line)
               for line in out)

    inn = dst.lines()
    assert [line["action"] for line in inn] == ["import_agent"] + ["import"] * 5
    assert inn[0]["via"] == "move" and inn[0]["source"].startswith("move:")
    assert inn[0]["sha256"] == report.sha256 and inn[0]["quotaBytes"] == 4096
    assert [(line["key"], line["category"], line["bytes"], line["createdBy"])
            for line in inn[1:]] == [(r.key, r.category.value, r.size, r.created_by)
                                     for r in newest_first(carried)]


def test_moving_an_agent_that_is_not_there(side: Callable[[str, str], Side]) -> None:
    src, dst = side("sqlite", "src"), side("sqlite", "dst")
    assert code_of(lambda: move_agent(src.store, dst.store, "nobody")) is ErrorCode.NOT_FOUND
    assert code_of(lambda: export_agent(src.store, "nobody", src.rot / "x.json")
                   ) is ErrorCode.NOT_FOUND
    assert not (src.rot / "x.json").exists()
    assert src.lines() == [] and dst.lines() == []


@pytest.mark.parametrize("src_kind, dst_kind", DIRECTIONS)
def test_refuses_when_the_destination_already_has_the_agent(
        side: Callable[[str, str], Side], clock: ManualClock, src_kind: str,
        dst_kind: str, tmp_path: Path) -> None:
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    dst.store.create_agent("bot", quota_bytes=100)
    dst.store.for_gene("bot", A, "formatter").write_memory("formatter/indent", b"8", "PREFERENCE")
    before_src, before_dst = state(src.store), state(dst.store)
    dst_lines = len(dst.lines())
    assert code_of(lambda: move_agent(src.store, dst.store, "bot")) is ErrorCode.INVALID_INPUT
    export_agent(src.store, "bot", tmp_path / "bot.json")
    assert code_of(lambda: import_agent(dst.store, tmp_path / "bot.json")
                   ) is ErrorCode.INVALID_INPUT
    assert state(src.store) == before_src and state(dst.store) == before_dst
    assert len(dst.lines()) == dst_lines
    assert "move" not in src.actions()


# -- all or nothing ---------------------------------------------------------------

def refuse_key_in(dst: Side, key: str) -> None:
    """Make the destination database itself refuse to store one key: a real
    error from the real database, half-way through the copy."""
    if dst.kind == "sqlite":
        conn = sqlite3.connect(dst.url[len("sqlite:"):])
        conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON memory_entries "
                     f"WHEN NEW.key = '{key}' BEGIN SELECT RAISE(ABORT, 'refused by test'); END")
        conn.commit()
        conn.close()
        return
    with psycopg.connect(dst.url, autocommit=True) as conn:
        conn.execute(f"""CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.key = '{key}' THEN RAISE EXCEPTION 'refused by test'; END IF;
            RETURN NEW; END $$""")  # type: ignore[arg-type]
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON memory_entries "
                     "FOR EACH ROW EXECUTE FUNCTION refuse()")


def break_audit(rot: Path) -> None:
    """Make the audit log impossible to append to (a directory in its place)."""
    path = rot / "audit.jsonl"
    if path.exists():
        path.unlink()
    path.mkdir()


@pytest.mark.parametrize("src_kind, dst_kind", DIRECTIONS)
def test_a_destination_error_mid_copy_changes_nothing(side: Callable[[str, str], Side],
                                                      clock: ManualClock, src_kind: str,
                                                      dst_kind: str, tmp_path: Path) -> None:
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    refuse_key_in(dst, "network/ctx")  # the 3rd of 5 entries
    before, src_lines = state(src.store), src.lines()
    assert code_of(lambda: move_agent(src.store, dst.store, "bot")) is ErrorCode.STORAGE_ERROR
    assert state(src.store) == before
    rolled_back_move(src, src_lines)
    assert not dst.store.has_agent("bot") and dst.lines() == []
    # The same through a file.
    export_agent(src.store, "bot", tmp_path / "bot.json")
    assert code_of(lambda: import_agent(dst.store, tmp_path / "bot.json")
                   ) is ErrorCode.STORAGE_ERROR
    assert not dst.store.has_agent("bot") and dst.lines() == []
    # And the source still works as before.
    src.store.for_gene("bot", A, "formatter").write_memory("formatter/after", b"1", "PATTERN")


def refuse_delete_in(side: Side) -> None:
    """Make the source database refuse to drop the agent: a real error from the
    real database after the destination's copy committed."""
    if side.kind == "sqlite":
        conn = sqlite3.connect(side.url[len("sqlite:"):])
        conn.execute("CREATE TRIGGER keep BEFORE DELETE ON memory_agents "
                     "BEGIN SELECT RAISE(ABORT, 'kept by test'); END")
        conn.commit()
        conn.close()
        return
    with psycopg.connect(side.url, autocommit=True) as conn:
        conn.execute("""CREATE FUNCTION keep() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'kept by test'; END $$""")
        conn.execute("CREATE TRIGGER keep BEFORE DELETE ON memory_agents "
                     "FOR EACH ROW EXECUTE FUNCTION keep()")


def unrefuse_delete_in(side: Side) -> None:
    if side.kind == "sqlite":
        conn = sqlite3.connect(side.url[len("sqlite:"):])
        conn.execute("DROP TRIGGER keep")
        conn.commit()
        conn.close()
        return
    with psycopg.connect(side.url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER keep ON memory_agents")


@pytest.mark.parametrize("src_kind, dst_kind", DIRECTIONS)
def test_a_failure_after_the_copy_committed_removes_the_copy(
        side: Callable[[str, str], Side], clock: ManualClock, src_kind: str,
        dst_kind: str) -> None:
    """The source cannot drop the agent, so the committed copy is removed again
    (audited at the destination); and if the source's log cannot be written the
    move fails before anything is copied."""
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    before, src_lines = state(src.store), src.lines()
    refuse_delete_in(src)
    assert code_of(lambda: move_agent(src.store, dst.store, "bot")) is ErrorCode.STORAGE_ERROR
    unrefuse_delete_in(src)
    assert state(src.store) == before
    rolled_back_move(src, src_lines)
    assert not dst.store.has_agent("bot")
    assert dst.actions() == ["import_agent"] + ["import"] * 5 + ["drop_agent"]
    break_audit(src.rot)
    dst_lines = dst.lines()
    assert code_of(lambda: move_agent(src.store, dst.store, "bot")) is ErrorCode.STORAGE_ERROR
    (src.rot / "audit.jsonl").rmdir()
    assert state(src.store) == before and dst.lines() == dst_lines
    move_agent(src.store, dst.store, "bot")  # and once the log is back, the move works
    assert dst.store.has_agent("bot") and not src.store.has_agent("bot")


@pytest.mark.parametrize("src_kind, dst_kind", DIRECTIONS)
def test_no_destination_audit_line_no_copy(side: Callable[[str, str], Side],
                                           clock: ManualClock, src_kind: str,
                                           dst_kind: str) -> None:
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    before = state(src.store)
    src_lines = src.lines()
    break_audit(dst.rot)
    assert code_of(lambda: move_agent(src.store, dst.store, "bot")) is ErrorCode.STORAGE_ERROR
    assert state(src.store) == before
    rolled_back_move(src, src_lines)
    assert not dst.store.has_agent("bot")


@pytest.mark.parametrize("src_kind, dst_kind", DIRECTIONS)
def test_a_destination_quota_too_small_changes_nothing(side: Callable[[str, str], Side],
                                                       clock: ManualClock, src_kind: str,
                                                       dst_kind: str, tmp_path: Path) -> None:
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    before = state(src.store)
    carried = sum(r.size for r in before[1] if r.category is not Category.CACHE)
    for quota in (carried - 1, 1):
        assert code_of(lambda: move_agent(src.store, dst.store, "bot", quota_bytes=quota)  # noqa: B023
                       ) is ErrorCode.QUOTA_EXCEEDED
    export_agent(src.store, "bot", tmp_path / "bot.json")
    assert code_of(lambda: import_agent(dst.store, tmp_path / "bot.json", quota_bytes=carried - 1)
                   ) is ErrorCode.QUOTA_EXCEEDED
    assert state(src.store) == before and not dst.store.has_agent("bot")
    assert dst.lines() == [] and "move" not in src.actions()
    # Exactly enough is enough: the agent arrives with the new quota, full.
    move_agent(src.store, dst.store, "bot", quota_bytes=carried)
    assert dst.store.usage("bot") == (carried, carried)


# -- export and import through a file -----------------------------------------------

@pytest.mark.parametrize("src_kind, dst_kind", PAIRS)
def test_export_then_import(side: Callable[[str, str], Side], clock: ManualClock,
                            src_kind: str, dst_kind: str, tmp_path: Path) -> None:
    src, dst = side(src_kind, "src"), side(dst_kind, "dst")
    populate(src.store, clock)
    before = state(src.store)
    path = tmp_path / "bot.json"
    exported = export_agent(src.store, "bot", path)
    assert state(src.store) == before  # an export is a copy
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT and data["agent"] == "bot"
    assert data["counts"] == {"PREFERENCE": 2, "PATTERN": 1, "CONTEXT": 2, "CACHE": 0}
    imported = import_agent(dst.store, path)
    assert rows(dst.store) == [r for r in before[1] if r.category is not Category.CACHE]
    assert (imported.entries, imported.bytes, imported.sha256) == (
        exported.entries, exported.bytes, exported.sha256)
    assert path.exists()  # an import leaves the file

    line = src.lines()[-1]
    assert (line["action"], line["agent"], line["actor"], line["entries"], line["sha256"],
            line["to"], line["keepCache"]) == (
        "export", "bot", "deployer", 5, exported.sha256, str(path), False)
    inn = dst.lines()
    assert [x["action"] for x in inn] == ["import_agent"] + ["import"] * 5
    assert inn[0]["via"] == "file" and inn[0]["source"] == f"file:{path}"


@pytest.mark.parametrize("kind", KINDS)
def test_export_with_keep_cache_and_into_a_second_project(side: Callable[[str, str], Side],
                                                          clock: ManualClock, kind: str,
                                                          tmp_path: Path) -> None:
    src, dst = side(kind, "src"), side("sqlite", "dst")
    populate(src.store, clock)
    path = tmp_path / "bot.json"
    report = export_agent(src.store, "bot", path, keep_cache=True)
    assert report.counts["CACHE"] == 2 and report.left_behind == 0
    import_agent(dst.store, path)
    assert rows(dst.store) == rows(src.store)


def test_no_audit_line_no_export_file(side: Callable[[str, str], Side], clock: ManualClock,
                                      tmp_path: Path) -> None:
    src = side("sqlite", "src")
    populate(src.store, clock)
    break_audit(src.rot)
    assert code_of(lambda: export_agent(src.store, "bot", tmp_path / "bot.json")
                   ) is ErrorCode.STORAGE_ERROR
    assert list(tmp_path.glob("*bot.json*")) == []


@pytest.fixture
def exported(side: Callable[[str, str], Side], clock: ManualClock, tmp_path: Path
             ) -> tuple[Side, Path, dict[str, Any]]:
    src = side("sqlite", "src")
    populate(src.store, clock)
    path = tmp_path / "bot.json"
    export_agent(src.store, "bot", path)
    return side("sqlite", "dst"), path, json.loads(path.read_text())


def _resign(data: dict[str, Any], n: int | None = None, *, total: bool = True) -> None:
    """Recompute the checksums after an edit, as a forger would (the rule is in
    the module docstring of rotifer.memory.transfer)."""
    for i, rec in enumerate(data["entries"]):
        if n is None or i == n:
            rec["sha256"] = _sha({k: v for k, v in rec.items() if k != "sha256"})
    if total:
        data["sha256"] = _sha({"agent": data["agent"], "settings": data["settings"],
                               "entries": [r["sha256"] for r in data["entries"]]})


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


TAMPERING: dict[str, Callable[[dict[str, Any]], None]] = {
    # Damage the checksums catch.
    "value": lambda d: d["entries"][0]["entry"].update(value="QUFBQQ=="),
    "createdBy": lambda d: d["entries"][1]["entry"].update(createdBy=C),
    "policy": lambda d: d["entries"][0]["entry"]["accessPolicy"].update(readScope="ALL_GENES"),
    "entry dropped": lambda d: d["entries"].pop(),
    "quota": lambda d: d["settings"].update(quotaBytes=10**9),
    "entry re-signed, total not": lambda d: (
        d["entries"][0]["entry"].update(value="QUFBQQ=="), _resign(d, 0, total=False)),
    "counts": lambda d: d["counts"].update(PATTERN=7),
    "totalBytes": lambda d: d.update(totalBytes=1),
    # Forgeries with valid checksums that the rules would never have admitted.
    "forged scope": lambda d: (d["entries"][0]["entry"]["accessPolicy"].update(
        readScope="DEPLOYER_CONFIGURED"), _resign(d)),
    "forged entryId": lambda d: (d["entries"][0]["entry"].update(entryId="0" * 64), _resign(d)),
    "forged expiry": lambda d: (d["entries"][2].update(expiresUs=None), _resign(d)),
    "forged cache": lambda d: (d["entries"][0]["entry"].update(category="CACHE"), _resign(d)),
    "forged duplicate": lambda d: (d["entries"].append(dict(d["entries"][0])), _resign(d)),
    "forged timestamp": lambda d: (d["entries"][0]["entry"].update(
        createdAt="2026-03-01T12:00:00+02:00"), _resign(d)),
    "forged seq": lambda d: (d["entries"][0].update(seq=d["settings"]["nextSeq"]), _resign(d)),
    "version": lambda d: d.update(version=2),
    "format": lambda d: d.update(format="something-else"),
    "extra field": lambda d: d.update(extra=1),
}


@pytest.mark.parametrize("how", list(TAMPERING))
def test_import_refuses_a_damaged_or_forged_file(exported: tuple[Side, Path, dict[str, Any]],
                                                 how: str) -> None:
    dst, path, data = exported
    TAMPERING[how](data)
    path.write_text(json.dumps(data))
    with pytest.raises(AgentMemoryError) as info:
        import_agent(dst.store, path)
    assert info.value.code is ErrorCode.INVALID_INPUT, info.value
    assert not dst.store.has_agent("bot") and dst.lines() == []


def test_checksum_errors_name_the_damage(exported: tuple[Side, Path, dict[str, Any]]) -> None:
    data = exported[2]
    data["entries"][0]["entry"]["createdBy"] = C
    with pytest.raises(AgentMemoryError, match="entry 0 fails its checksum"):
        check_export(data)
    _resign(data, 0, total=False)
    with pytest.raises(AgentMemoryError, match="total checksum"):
        check_export(data)
    _resign(data)
    check_export(data)  # consistent again: the checksums catch damage, not forgery


@pytest.mark.parametrize("content", [b"", b"not json", b"[1, 2]", b"\xff\xfe", b'{"format": 1}'])
def test_import_refuses_what_is_not_an_export(side: Callable[[str, str], Side], tmp_path: Path,
                                              content: bytes) -> None:
    dst = side("sqlite", "dst")
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert code_of(lambda: import_agent(dst.store, path)) is ErrorCode.INVALID_INPUT
    assert code_of(lambda: import_agent(dst.store, tmp_path / "missing.json")
                   ) is ErrorCode.INVALID_INPUT
    assert dst.store.agents() == [] and dst.lines() == []


def test_read_export_round_trips_the_document(exported: tuple[Side, Path, dict[str, Any]]
                                              ) -> None:
    _, path, data = exported
    assert read_export(path) == data
    record, new_rows = check_export(data)
    assert record.agent_id == "bot" and len(new_rows) == 5
