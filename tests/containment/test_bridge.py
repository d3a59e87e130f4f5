"""The memory bridge's waits (contain/channel.py, contain/pychild.py) keep
their bounds however busy the bridge is.

Each side first retries a non-blocking read for a few hundred microseconds
before it sleeps (contain/spin.py); these tests pin down what that must not
change: a gene whose messages never stop coming -- memory calls or log lines
back to back, so every read of the parent finds one waiting and never sleeps
-- still ends at its deadline; one that floods its output between memory
calls neither stalls the run nor gets more than its share passed on; one that
stops answering ends at its deadline.  No test depends on machine speed: the
deadlines are seconds long and only the outcome is asserted.

And the child builds the entries the parent sends from cached parts
(pychild._entry): the same entries as ``MemoryEntry.from_json``, odd ones too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rotifer.genes.contain.channel import MAX_OUTPUT_BYTES
from rotifer.genes.contain.pychild import _entry
from rotifer.genes.contain.sandbox import CONTAINED
from rotifer.genes.errors import GeneFailed
from rotifer.genes.execute import express
from rotifer.genes.gene import Gene, load_gene, register_gene
from rotifer.genes.registry import Registry
from rotifer.memory import AgentMemoryError, MemoryEntry, MemoryStore
from tests.genes.helpers import write_gene

ENDLESS = {
    "calls": "def express(input, ctx):\n    while True:\n"
             "        ctx.memory.read_memory('none/here')\n",
    "writes": "def express(input, ctx):\n    i = 0\n    while True:\n"
              "        ctx.memory.write_memory('b/k%d' % (i % 20), b'v', 'CACHE')\n"
              "        i += 1\n",
    "logs": "def express(input, ctx):\n    while True:\n        ctx.log('again')\n",
    "silent": "import time\ndef express(input, ctx):\n    ctx.memory.read_memory('a/b')\n"
              "    time.sleep(3600)\n",
}


def _gene(tmp_path: Path, name: str, code: str) -> Gene:
    registry = Registry(tmp_path / ".rotifer")
    write_gene(tmp_path / "genes", name, code)
    return register_gene(load_gene(tmp_path / "genes", name, registry), registry, via="wrap")


@pytest.mark.parametrize("kind", sorted(ENDLESS))
def test_a_gene_ends_at_its_deadline_however_it_talks(tmp_path: Path, kind: str) -> None:
    gene = _gene(tmp_path, kind, ENDLESS[kind])
    lines: list[str] = []
    with MemoryStore.open(tmp_path / ".rotifer") as store:
        store.create_agent("a", 1 << 30)
        memory = store.for_gene("a", gene.v2_id, gene.domain)
        with pytest.raises(GeneFailed, match=r"ran past its deadline of 1\.5 s"):
            express(gene, None, memory, deadline_s=1.5, grant=CONTAINED,
                    log_sink=lambda name, line: lines.append(line))
    if kind == "logs":  # ctx.log lines count against the output budget (1 MiB a run)
        last = lines[-1:] if lines and "bytes of output dropped" in lines[-1] else []
        assert lines and set(lines[:len(lines) - len(last)]) == {"again"}, lines[-3:]


def test_a_gene_flooding_its_output_between_calls_is_served_and_cut(tmp_path: Path) -> None:
    code = ("import os\ndef express(input, ctx):\n    n = 0\n"
            "    for i in range(200):\n"
            "        os.write(2, b'x' * 32768 + b'\\n')\n"
            "        n += ctx.memory.read_memory('none/here') is None\n"
            "    return n\n")
    gene = _gene(tmp_path, "loud", code)
    lines: list[str] = []
    with MemoryStore.open(tmp_path / ".rotifer") as store:
        store.create_agent("a", 1 << 30)
        memory = store.for_gene("a", gene.v2_id, gene.domain)
        got = express(gene, None, memory, deadline_s=60, grant=CONTAINED,
                      log_sink=lambda name, line: lines.append(line))
    assert got == 200
    assert sum(len(line) + 1 for line in lines) < MAX_OUTPUT_BYTES + (64 << 10)
    assert lines[-1].startswith("... ") and "bytes of output dropped" in lines[-1]


ENTRY = {"entryId": "e" * 64, "category": "CACHE", "key": "b/k", "value": "dg==",
         "createdBy": "v2:" + "a" * 64, "lastAccessedBy": "v2:" + "b" * 64,
         "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-02T00:00:00.000Z",
         "accessPolicy": {"readScope": "SAME_DOMAIN", "writeScope": "CREATOR_GENE_ONLY",
                          "sharePolicy": "PRIVATE"},
         "retentionPolicy": None}


@pytest.mark.parametrize("change", [
    {}, {"category": "PATTERN"}, {"value": ""}, {"extra": 1},
    {"retentionPolicy": {"maxRetentionDays": 3, "autoDeleteOnTermination": True,
                         "anonymizationSupported": False}},
    {"accessPolicy": {"readScope": "ALL_GENES", "writeScope": "SAME_DOMAIN",
                      "sharePolicy": "PRIVATE"}},
])
def test_the_childs_entries_are_from_json_s(change: dict[str, object]) -> None:
    """The child builds the parent's entries from cached parts
    (pychild._entry): the same entry as MemoryEntry.from_json, seen once or
    again."""
    doc = {**ENTRY, **change}
    for _ in range(2):
        assert _entry(doc) == MemoryEntry.from_json(doc)


@pytest.mark.parametrize("change", [
    {"value": "not base64!"}, {"category": "NOPE"}, {"key": 3}, {"accessPolicy": None},
    {"accessPolicy": {"readScope": "SAME_DOMAIN", "writeScope": "SAME_DOMAIN"}},
    {"accessPolicy": {"readScope": "SAME_DOMAIN", "writeScope": "CREATOR_GENE_ONLY",
                      "sharePolicy": "PRIVATE", "x": 1}},
])
def test_an_odd_entry_is_from_json_s_too(change: dict[str, object]) -> None:
    doc = {**ENTRY, **change}
    _entry(ENTRY)  # its policy cached
    try:
        expected = MemoryEntry.from_json(doc)
    except AgentMemoryError as exc:
        with pytest.raises(AgentMemoryError) as got:
            _entry(doc)
        assert str(got.value) == str(exc)
    else:
        assert _entry(doc) == expected


def test_large_messages_both_ways_and_lines_split_across_reads(tmp_path: Path) -> None:
    """A 24 MiB result, a 1 MiB write (base64: 1.3 MiB each way) and many small calls on one pipe: every
    message whole, whatever the reads cut it into (the parent's buffer takes
    each chunk once; before, it searched and copied all it held at every read,
    6.2 s for one 32 MiB message -- docs/benchmarks.md, "Containment")."""
    code = ("def express(input, ctx):\n"
            "    for i in range(200):\n"
            "        ctx.memory.write_memory('b/k%d' % (i % 7), b'v' * (i % 50), 'CACHE')\n"
            "    ctx.memory.write_memory('b/big', b'w' * (1 << 20), 'CACHE')\n"
            "    assert ctx.memory.read_memory('b/big').value == b'w' * (1 << 20)\n"
            "    return {'text': 'x' * (24 << 20), 'n': 200}\n")
    gene = _gene(tmp_path, "big", code)
    with MemoryStore.open(tmp_path / ".rotifer") as store:
        store.create_agent("a", 1 << 30)
        memory = store.for_gene("a", gene.v2_id, gene.domain)
        result = express(gene, None, memory, deadline_s=300, grant=CONTAINED)
        assert result == {"text": "x" * (24 << 20), "n": 200}
        assert memory.read_memory("b/big").value == b"w" * (1 << 20)  # type: ignore[union-attr]


def test_the_nesting_limit_is_exact_and_walks_no_recursion() -> None:
    """200 levels of arrays and objects are a message; 201 are a protocol
    violation (contain/channel.py); the walk has a stack of its own."""
    from rotifer.genes.contain.protocol import MAX_NESTING, too_deep

    deep: dict[str, list[Any]] = {"a": []}
    inner: list[Any] = deep["a"]
    for _ in range(MAX_NESTING - 2):
        inner.append([])
        inner = inner[0]
    assert not too_deep(deep)  # 200 deep
    inner.append({})
    assert too_deep(deep)
    assert not too_deep({"type": "log", "line": "[" * 5000})  # brackets in text are text
