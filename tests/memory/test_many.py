"""Many reads and changes of one gene in one go (rotifer.memory.views.many, issue 32):
each op answers, stores and audits exactly what the call alone does -- checked
against the calls made one by one on a twin agent -- while the changes share
one write transaction; a storage failure fails them all and rolls each back in
the log.  On SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, ManualClock, MemoryEntry, MemoryStore
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.views.gene_memory import GeneMemory
from rotifer.memory.views.many import Delete, Outcome, Write, change_many, read_many
from tests.memory.conftest import StoreFactory
from tests.memory.helpers import RETAIN_1_DAY, audit_lines, gene_id

A, B = gene_id("many-a"), gene_id("many-b")
MINE = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
        "sharePolicy": "PRIVATE"}
QUOTA = 300
#: The agent made one call at a time, and its twin given the same calls at once.
ONE, MANY = "one", "many"


@pytest.fixture
def twins(store_factory: StoreFactory, tmp_path: Path, clock: ManualClock) -> MemoryStore:
    store = store_factory(tmp_path / ".rotifer", clock=clock)
    for agent in (ONE, MANY):
        store.create_agent(agent, quota_bytes=QUOTA)
        a = store.for_gene(agent, A, "d")
        b = store.for_gene(agent, B, "d")
        b.write_memory("theirs", b"b" * 10, "CONTEXT", MINE)
        a.write_memory("c1", b"1" * 60, "CACHE")
        a.write_memory("c2", b"2" * 60, "CACHE")
        a.write_memory("pref", b"p" * 60, "PREFERENCE")
        a.write_memory("seen", b"s", "CONTEXT")
        b.read_memory("seen")  # last read by B: A's read must note A again
        a.write_memory("brief", b"t", "CONTEXT", retention_policy=RETAIN_1_DAY)
    return store


OPS: list[Write | Delete] = [
    Write("new", b"n" * 10, "CONTEXT"),
    Write("theirs", b"x", "CONTEXT"),            # B's entry, B's writeScope: refused
    Write("big", b"g" * 100, "PATTERN"),         # over quota: evicts c1
    Delete("c1"),                                 # evicted just before: not found
    Write("huge", b"h" * 390, "CONTEXT"),        # more than cleanup can free: refused
    Write("new", b"again", "CONTEXT", MINE),     # the same key again: an update
    Delete("new"),
    Write("", b"empty key", "CONTEXT"),          # bad input
    Write("typed", "not bytes", "CONTEXT"),      # type: ignore[arg-type]  # bad input
    Write("new", b"third", "PATTERN"),           # written anew
    Delete("missing"),
    Write("ret", b"r", "CONTEXT", None, {"maxRetentionDays": 9999,
                                          "autoDeleteOnTermination": False,
                                          "anonymizationSupported": False}),
]


def _one_by_one(memory: GeneMemory, ops: list[Write | Delete]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for op in ops:
        try:
            if isinstance(op, Write):
                outcomes.append(memory.write_memory(*op))
            else:
                memory.delete_memory(op.key)
                outcomes.append(None)
        except AgentMemoryError as exc:
            outcomes.append(exc)
    return outcomes


def _plain(outcome: Outcome) -> Any:
    """An outcome without what differs between twin agents (the entry id)."""
    if isinstance(outcome, AgentMemoryError):
        return (outcome.code, outcome.message)
    if isinstance(outcome, MemoryEntry):
        return {k: v for k, v in outcome.to_json().items() if k != "entryId"}
    return outcome


def _lines(rot: Path, agent: str) -> list[dict[str, Any]]:
    drop = {"agent", "entryId", "epoch", "prev", "hash"}
    return [{k: v for k, v in line.items() if k not in drop}
            for line in audit_lines(rot) if line.get("agent") == agent]


def _stored(store: MemoryStore, agent: str) -> list[Any]:
    return sorted((_plain(e)["key"], _plain(e)) for e in store.deployer(agent).pick("", lambda e: e, None))


def test_change_many_does_what_each_call_does_alone(twins: MemoryStore, tmp_path: Path
                                                    ) -> None:
    rot = tmp_path / ".rotifer"
    alone = _one_by_one(twins.for_gene(ONE, A, "d"), OPS)
    together = change_many(twins.for_gene(MANY, A, "d"), OPS)
    assert [_plain(o) for o in together] == [_plain(o) for o in alone]
    codes = [o.code if isinstance(o, AgentMemoryError) else None for o in together]
    assert codes == [None, ErrorCode.ACCESS_DENIED, None, ErrorCode.NOT_FOUND,
                     ErrorCode.QUOTA_EXCEEDED, None, None, ErrorCode.INVALID_INPUT,
                     ErrorCode.INVALID_INPUT, None, ErrorCode.NOT_FOUND, None]
    assert _stored(twins, MANY) == _stored(twins, ONE)
    assert _lines(rot, MANY) == _lines(rot, ONE)
    # Each change its own number, in order; the log's chain ends at the anchor.
    seqs = [line["seq"] for line in audit_lines(rot) if line.get("agent") == MANY]
    assert seqs == sorted(seqs) and len(set(seqs)) > 6
    assert twins.agent_record(MANY).next_seq == twins.agent_record(ONE).next_seq
    assert twins.agent_record(MANY).used_bytes == twins.agent_record(ONE).used_bytes
    assert verify_agent(twins, MANY).ok


def test_the_first_change_purges_what_expired(twins: MemoryStore, clock: ManualClock,
                                              tmp_path: Path) -> None:
    clock.advance(days=2)
    ops: list[Write | Delete] = [Delete("brief"), Write("later", b"l", "CONTEXT")]
    alone = _one_by_one(twins.for_gene(ONE, A, "d"), ops)
    together = change_many(twins.for_gene(MANY, A, "d"), ops)
    assert [_plain(o) for o in together] == [_plain(o) for o in alone]
    rot = tmp_path / ".rotifer"
    assert _lines(rot, MANY) == _lines(rot, ONE)
    assert [line["action"] for line in _lines(rot, MANY)][-2:] == ["expire", "write"]


def test_each_change_carries_its_own_run(twins: MemoryStore, tmp_path: Path) -> None:
    ops: list[Write | Delete] = [Write("x", b"1", "CONTEXT"), Write("y", b"2", "CONTEXT")]
    change_many(twins.for_gene(MANY, A, "d"), ops,
                [{"thread_id": "t1", "run_id": "r1"}, None])
    lines = audit_lines(tmp_path / ".rotifer")[-2:]
    assert [(line["key"], line.get("context")) for line in lines] == [
        ("x", {"thread_id": "t1", "run_id": "r1"}), ("y", None)]
    with pytest.raises(ValueError, match="one context per op"):
        change_many(twins.for_gene(MANY, A, "d"), ops, [None])


def test_a_gene_without_a_v2_id_is_refused_each_op(twins: MemoryStore) -> None:
    outcomes = change_many(twins.for_gene(MANY, None, "d"), [Write("x", b"1", "CONTEXT"),
                                                             Delete("c1")])
    assert [o.code for o in outcomes if isinstance(o, AgentMemoryError)] == [
        ErrorCode.ACCESS_DENIED] * 2
    reads = read_many(twins.for_gene(MANY, None, "d"), ["c1"])
    assert isinstance(reads[0], AgentMemoryError)
    assert reads[0].code is ErrorCode.ACCESS_DENIED


def _break_the_store(store: MemoryStore, store_factory: StoreFactory,
                     request: pytest.FixtureRequest) -> None:
    """Make the database itself refuse an entry keyed ``boom`` (a trigger on
    SQLite, a CHECK constraint on PostgreSQL): the write fails at the server."""
    url = store_factory.url()
    if url.startswith("sqlite:"):
        with sqlite3.connect(url[len("sqlite:"):]) as conn:
            conn.execute("CREATE TRIGGER broken BEFORE INSERT ON memory_entries "
                         "WHEN NEW.key = 'boom' BEGIN SELECT RAISE(ABORT, 'broken'); END")
        return
    admin = request.getfixturevalue("admin")
    schema = store.backend.schema  # type: ignore[attr-defined]
    admin.execute(f'ALTER TABLE "{schema}".memory_entries ADD CONSTRAINT broken '
                  "CHECK (key <> 'boom')")


def test_a_change_the_store_fails_is_that_ops_outcome_and_rolled_back(
        twins: MemoryStore, tmp_path: Path, store_factory: StoreFactory,
        request: pytest.FixtureRequest) -> None:
    """Each change is its own transaction: the one the database refuses is
    MEMORY_STORAGE_ERROR, stored nowhere and taken back in the log if its line
    went out (so the log still replays to the store); the others are made."""
    rot = tmp_path / ".rotifer"
    memory = twins.for_gene(MANY, A, "d")
    _break_the_store(twins, store_factory, request)
    outcomes = change_many(memory, [Write("first", b"1", "CONTEXT"), Delete("c2"),
                                    Write("boom", b"2", "CONTEXT"),
                                    Write("last", b"3", "CONTEXT")])
    failed = outcomes[2]
    assert isinstance(failed, AgentMemoryError) and failed.code is ErrorCode.STORAGE_ERROR
    assert isinstance(outcomes[0], MemoryEntry) and outcomes[1] is None
    assert isinstance(outcomes[3], MemoryEntry)
    keys = [key for key, _ in _stored(twins, MANY)]
    assert "first" in keys and "last" in keys and "boom" not in keys and "c2" not in keys
    boom = [line for line in _lines(rot, MANY) if line.get("key") == "boom"]
    # PostgreSQL: the write goes out with COMMIT, after its line; SQLite: at once.
    assert bool(boom) == (store_factory.backend == "postgres")
    if boom:
        rolled = [line["seq"] for line in _lines(rot, MANY) if line["action"] == "rolled_back"]
        assert rolled == [boom[0]["seq"]]
    assert verify_agent(twins, MANY).ok


def test_read_many_answers_what_each_read_answers_alone(twins: MemoryStore, tmp_path: Path,
                                                       clock: ManualClock) -> None:
    clock.advance(days=2)  # "brief" has expired: the reads purge it, as one alone does
    keys = ["c1", "theirs", "seen", "missing", "", "pref", "brief", "c1"]
    one = twins.for_gene(ONE, A, "d")
    alone: list[Outcome] = []
    for key in keys:
        try:
            alone.append(one.read_memory(key))
        except AgentMemoryError as exc:
            alone.append(exc)
    together = read_many(twins.for_gene(MANY, A, "d"), keys)
    assert [_plain(o) for o in together] == [_plain(o) for o in alone]
    assert [type(o).__name__ for o in together] == [
        "MemoryEntry", "AgentMemoryError", "MemoryEntry", "NoneType", "AgentMemoryError",
        "MemoryEntry", "NoneType", "MemoryEntry"]
    seen = together[2]
    assert isinstance(seen, MemoryEntry) and seen.last_accessed_by == A  # noted again
    assert _stored(twins, MANY) == _stored(twins, ONE)
    rot = tmp_path / ".rotifer"
    assert _lines(rot, MANY) == _lines(rot, ONE)  # the refusal and the purge, audited
