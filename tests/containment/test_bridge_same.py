"""A gene cannot tell it is contained by what ``ctx.memory`` returns: the
same calls, run in process and through the bridge on two stores with the same
clock, give equal entries (every field, and each field's type) and equal
errors.  The bridge answers the usual read and write in a short form
(contain/replies.py; a write's reply without the value the child sent)
and sends the usual requests from a template (pychild._WRITE_LINE): the calls
below take those paths and every other one (policies given, a retention
policy, bytearray and memoryview values, refusals).  Not compared: a key of
a ``str`` subclass, which an in-process entry keeps as the gene's own object
(the lean write path stores the argument) and the bridge, before this test
as since, returns as a plain ``str`` of the same text.
"""

from __future__ import annotations

from pathlib import Path

from rotifer.genes.contain.sandbox import CONTAINED, Grant
from rotifer.genes.execute import express
from rotifer.genes.gene import load_gene, register_gene
from rotifer.genes.registry import Registry
from rotifer.memory import MemoryStore
from rotifer.memory.clock import ManualClock
from tests.genes.helpers import write_gene

CALLS = r'''
POLICY = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "SAME_DOMAIN",
          "sharePolicy": "PRIVATE"}
KEEP = {"maxRetentionDays": 5, "autoDeleteOnTermination": False,
        "anonymizationSupported": False}


def shown(got):
    if isinstance(got, list):
        return [shown(g) for g in got]
    if got is None:
        return None
    fields = ("entry_id", "category", "key", "value", "created_by", "last_accessed_by",
              "created_at", "updated_at", "access_policy", "retention_policy")
    return [type(got).__name__, repr(got)] + [type(getattr(got, f)).__name__ for f in fields]


def express(input, ctx):
    m = ctx.memory
    calls = [
        lambda: m.write_memory("b/k1", b"v" * 100, "CACHE"),
        lambda: m.write_memory("b/k1", b"w", "CACHE"),
        lambda: m.read_memory("b/k1"),
        lambda: m.read_memory("b/k1", "CACHE"),
        lambda: m.read_memory("b/k1", "PATTERN"),
        lambda: m.read_memory("b/none"),
        lambda: m.write_memory("b/ba", bytearray(b"xy"), "PATTERN"),
        lambda: m.write_memory("b/mv", memoryview(b"abc"), "CONTEXT"),
        lambda: m.write_memory("b/pol", b"p", "CACHE", POLICY),
        lambda: m.write_memory("b/ret", b"r", "PREFERENCE", None, KEEP),
        lambda: m.write_memory("b/none", b"n", "CACHE", None, None),
        lambda: m.read_memory("b/ret"),
        lambda: m.read_memory("b/pol"),
        lambda: m.write_memory("b/\u043a\u043b\u044e\u0447", b"\x00\xff" * 5000, "CACHE"),
        lambda: m.read_memory("b/\u043a\u043b\u044e\u0447"),
        lambda: m.write_memory("b/\"quote\\", b"", "CACHE"),
        lambda: m.read_memory("b/\"quote\\"),
        lambda: m.write_memory("", b"v", "CACHE"),
        lambda: m.write_memory("b/x", "text", "CACHE"),
        lambda: m.write_memory("b/x", b"v", "NOPE"),
        lambda: m.write_memory("b/\ud800", b"v", "CACHE"),
        lambda: m.read_memory("b/\ud800"),
        lambda: m.write_memory(5, b"v", "CACHE"),
        lambda: m.read_memory(None),
        lambda: m.write_memory("b/x", b"v", "CACHE", {"bad": 1}),
        lambda: m.write_memory("b/big", b"v" * (1 << 20 + 1), "CACHE"),
        lambda: m.query_memory(),
        lambda: m.query_memory({"category": "CACHE"}),
        lambda: m.delete_memory("b/k1"),
        lambda: m.read_memory("b/k1"),
    ]
    out = []
    for call in calls:
        try:
            out.append(["ok", shown(call())])
        except Exception as exc:
            out.append(["error", type(exc).__name__, str(getattr(exc, "code", "")), str(exc)])
    return out
'''


def test_the_same_calls_give_the_same_entries_and_errors(tmp_path: Path) -> None:
    registry = Registry(tmp_path / ".rotifer")
    write_gene(tmp_path / "genes", "calls", CALLS)
    gene = register_gene(load_gene(tmp_path / "genes", "calls", registry), registry, via="wrap")
    got = {}
    for name, grant in (("contained", CONTAINED), ("in process", Grant(trusted=True))):
        db = tmp_path / f"{name}.db"
        with MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{db}",
                              clock=ManualClock("2026-03-01T12:00:00Z")) as store:
            store.create_agent("a", 1 << 30)
            memory = store.for_gene("a", gene.v2_id, gene.domain)
            got[name] = express(gene, None, memory, grant=grant, deadline_s=120)
    assert len(got["contained"]) == 30
    differ = [(i, c, p) for i, (c, p) in enumerate(zip(got["contained"], got["in process"],
                                                        strict=True)) if c != p]
    assert differ == []
    assert [r[0] for r in got["contained"]].count("error") >= 8
