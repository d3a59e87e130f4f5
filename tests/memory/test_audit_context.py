"""The run a change was made for on its audit lines (rotifer.memory.context):
write (lean and full path), update, delete and a refusal carry it; evict and
expire lines do not; only thread_id and run_id, strings, cut at 200; the log
still verifies -- on both backends."""

from __future__ import annotations

from pathlib import Path

from rotifer.memory import MemoryStore
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.context import audit_context, clean_context

from .helpers import audit_lines, code_of, gene_id

A, B = gene_id("ctx-a"), gene_id("ctx-b")
MINE = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
        "sharePolicy": "PRIVATE"}


def test_lines_of_a_change_carry_its_context(store: MemoryStore, rot: Path) -> None:
    a = store.for_gene("agent", A, "d")
    run = {"thread_id": "t-1", "run_id": "r-1"}
    with audit_context(run):
        a.write_memory("k", b"v", "CACHE")
        a.write_memory("k", b"v2", "CACHE")
        a.write_memory("p", b"v", "CACHE", MINE)
    a.write_memory("plain", b"v", "CACHE")
    with audit_context({"thread_id": "t-2"}):
        code_of(lambda: store.for_gene("agent", B, "d").delete_memory("p"))
        a.delete_memory("k")
    got = [(line["action"], line["key"], line.get("context")) for line in audit_lines(rot)]
    assert got == [("write", "k", run), ("update", "k", run), ("write", "p", run),
                   ("write", "plain", None), ("access_denied", "p", {"thread_id": "t-2"}),
                   ("delete", "k", {"thread_id": "t-2"})]
    assert verify_agent(store, "agent").ok


def test_evictions_are_not_the_runs(store: MemoryStore, rot: Path) -> None:
    store.create_agent("small", quota_bytes=300)
    a = store.for_gene("small", A, "d")
    a.write_memory("old", b"x" * 200, "CACHE")
    with audit_context({"thread_id": "t"}):
        a.write_memory("new", b"y" * 200, "CONTEXT")
    lines = [line for line in audit_lines(rot) if line["agent"] == "small"]
    assert [(line["action"], "context" in line) for line in lines] == [
        ("write", False), ("evict", False), ("write", True)]


def test_only_known_names_and_short_strings() -> None:
    assert clean_context({"thread_id": "t" * 500, "run_id": 7, "user": "x"}) == {
        "thread_id": "t" * 200}
    assert clean_context({"run_id": ""}) is None
    assert clean_context(None) is None
