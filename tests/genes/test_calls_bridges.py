"""The dispatcher (rotifer.genes.calls) through the real bridges: a contained
Python child speaking raw lines on its own message pipe (each op, each
refusal of its decoding, ops outside the vocabulary), and the same calls
through a contained Python gene, a Node.js gene and the WASM host's request
path giving the same answers and the same refusals, word for word."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from rotifer.genes.calls import Op
from rotifer.genes.contain.replies import ShortEntry
from rotifer.genes.contain.sandbox import CONTAINED
from rotifer.genes.errors import GeneFailed
from rotifer.genes.execute import express
from rotifer.genes.gene import Gene, load_gene, register_gene
from rotifer.genes.registry import Registry
from rotifer.genes.wasm import requests
from rotifer.memory import AgentMemoryError, ManualClock, MemoryStore
from tests.genes.helpers import write_gene

GENE_ID = "v2:" + "ab" * 32
KEEP = {"maxRetentionDays": 5, "autoDeleteOnTermination": False,
        "anonymizationSupported": False}

#: Raw lines a contained Python gene writes on its own message pipe, and the
#: replies it reads back.
RAW_PY = r'''
import json
LINES = [
    {"type": "call", "op": "write",
     "args": {"key": "c/k", "value": {"$bytes": "dg=="}, "category": "CACHE",
              "accessPolicy": None}},
    {"type": "call", "op": "read", "args": {"key": "c/k", "category": None}},
    {"type": "call", "op": "read", "args": {"key": "c/none", "category": None}},
    {"type": "call", "op": "query", "args": {"filter": {"category": "CACHE"}}},
    {"type": "call", "op": "read", "args": [1]},
    {"type": "call", "op": "write",
     "args": {"key": "c/x", "value": {"$bytes": "a"}, "category": "CACHE"}},
    {"type": "call", "op": "read", "args": {"key": {"$type": "Thing"}}},
    {"type": "call", "op": "delete", "args": {"key": "c/k"}},
]
def express(input, ctx):
    pipe = ctx.memory._pipe
    out = []
    for line in LINES:
        pipe.send_line((json.dumps(line) + "\n").encode())
        out.append(pipe.receive())
    return out
'''


def registered(tmp_path: Path, name: str, code: str, file: str = "gene.py") -> Gene:
    registry = Registry(tmp_path / ".rotifer")
    write_gene(tmp_path / "genes", name, code, file=file, domain="calls")
    return register_gene(load_gene(tmp_path / "genes", name, registry), registry, via="wrap")


def run(tmp_path: Path, gene: Gene) -> Any:
    with MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / gene.name}.db",
                          clock=ManualClock("2026-03-01T12:00:00Z")) as store:
        store.create_agent("a", 1 << 30)
        return express(gene, None, store.for_gene("a", gene.v2_id, gene.domain),
                       grant=CONTAINED, deadline_s=120)


def test_the_python_bridge_answers_raw_calls_by_the_dispatcher(tmp_path: Path) -> None:
    write, read, missing, query, not_object, bad_base64, stand_in, delete = run(
        tmp_path, registered(tmp_path, "raw", RAW_PY))
    written = ShortEntry(*write["ok"])
    assert written.value is None  # the child sent it
    assert (written.category, written.read_scope) == ("CACHE", "SAME_DOMAIN")
    assert ShortEntry(*read["ok"]).value == "dg=="
    assert missing == {"ok": None}
    assert [e["key"] for e in query["ok"]] == ["c/k"]
    assert not_object == {"error": {"code": "MEMORY_INVALID_INPUT",
                                    "message": "a memory call's arguments must be an object"}}
    assert bad_base64["error"]["code"] == "MEMORY_INVALID_INPUT"
    assert "base64" in bad_base64["error"]["message"]
    assert stand_in == {"error": {"code": "MEMORY_INVALID_INPUT",
                                  "message": "key must be a string"}}
    assert delete == {"ok": None}


FORGED_OP = r'''
import json
def express(input, ctx):
    ctx.memory._pipe.send_line(json.dumps(
        {"type": "call", "op": input, "args": {"key": "c/k"}}).encode() + b"\n")
    return ctx.memory._pipe.receive()
'''


@pytest.mark.parametrize("op", ["readMemory", "drop", ["read"], {"read": 1}, None])
def test_an_op_outside_the_vocabulary_is_a_protocol_violation(tmp_path: Path, op: Any) -> None:
    gene = registered(tmp_path, "forger", FORGED_OP)
    with MemoryStore.open(tmp_path / ".rotifer") as store:
        store.create_agent("a", 1 << 30)
        with pytest.raises(GeneFailed, match="protocol"):
            express(gene, op, store.for_gene("a", gene.v2_id, gene.domain), grant=CONTAINED,
                    deadline_s=120)


#: The same calls in each bridge's language; each answer as [key, value, category]
#: or ["error", code, message].
SAME_PY = r'''
KEEP = {"maxRetentionDays": 5, "autoDeleteOnTermination": False,
        "anonymizationSupported": False}
def shown(got):
    if got is None:
        return None
    if isinstance(got, list):
        return [shown(g) for g in got]
    return [got.key, got.value.decode(), got.category.value, got.retention_policy is not None]
def express(input, ctx):
    m = ctx.memory
    attempts = [
        lambda: m.write_memory("c/k", b"v", "CACHE"),
        lambda: m.write_memory("c/r", b"r", "PREFERENCE", None, KEEP),
        lambda: m.read_memory("c/k"),
        lambda: m.read_memory("c/r", "PREFERENCE"),
        lambda: m.read_memory("c/none"),
        lambda: m.query_memory({"category": "CACHE"}),
        lambda: m.write_memory("c/x", b"v", "NOPE"),
        lambda: m.write_memory("c/x", b"v", "CACHE", {"readScope": "EVERYONE"}),
        lambda: m.query_memory({"limit": -1}),
        lambda: m.delete_memory("c/none"),
        lambda: m.delete_memory("c/k"),
        lambda: m.read_memory("c/k"),
    ]
    out = []
    for attempt in attempts:
        try:
            out.append(shown(attempt()))
        except Exception as exc:
            out.append(["error", exc.code.value, exc.message])
    return out
'''

SAME_JS = r'''
const KEEP = {maxRetentionDays: 5, autoDeleteOnTermination: false,
              anonymizationSupported: false};
function shown(got) {
  if (got === null || got === undefined) return null;
  if (Array.isArray(got)) return got.map(shown);
  return [got.key, Buffer.from(got.value).toString(), got.category,
          got.retentionPolicy !== null];
}
exports.express = (input, ctx) => {
  const m = ctx.memory;
  const v = (text) => new Uint8Array(Buffer.from(text));
  const attempts = [
    () => m.writeMemory("c/k", v("v"), "CACHE"),
    () => m.writeMemory("c/r", v("r"), "PREFERENCE", undefined, KEEP),
    () => m.readMemory("c/k"),
    () => m.readMemory("c/r", "PREFERENCE"),
    () => m.readMemory("c/none"),
    () => m.queryMemory({category: "CACHE"}),
    () => m.writeMemory("c/x", v("v"), "NOPE"),
    () => m.writeMemory("c/x", v("v"), "CACHE", {readScope: "EVERYONE"}),
    () => m.queryMemory({limit: -1}),
    () => m.deleteMemory("c/none"),
    () => m.deleteMemory("c/k"),
    () => m.readMemory("c/k"),
  ];
  return attempts.map((attempt) => {
    try { return shown(attempt()); }
    catch (e) { return ["error", e.code, e.message]; }
  });
};
'''


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


#: The same calls as WASM requests (op, request).
SAME_WASM: list[tuple[Op, Any]] = [
    (Op.WRITE, {"key": "c/k", "value": b64("v"), "category": "CACHE"}),
    (Op.WRITE, {"key": "c/r", "value": b64("r"), "category": "PREFERENCE",
                "retentionPolicy": KEEP}),
    (Op.READ, {"key": "c/k"}),
    (Op.READ, {"key": "c/r", "category": "PREFERENCE"}),
    (Op.READ, {"key": "c/none"}),
    (Op.QUERY, {"category": "CACHE"}),
    (Op.WRITE, {"key": "c/x", "value": b64("v"), "category": "NOPE"}),
    (Op.WRITE, {"key": "c/x", "value": b64("v"), "category": "CACHE",
                "accessPolicy": {"readScope": "EVERYONE"}}),
    (Op.QUERY, {"limit": -1}),
    (Op.DELETE, {"key": "c/none"}),
    (Op.DELETE, {"key": "c/k"}),
    (Op.READ, {"key": "c/k"}),
]


def shown_json(doc: Any) -> Any:
    if doc is None or doc == {}:
        return None
    if isinstance(doc, list):
        return [shown_json(d) for d in doc]
    return [doc["key"], base64.b64decode(doc["value"]).decode(), doc["category"],
            doc["retentionPolicy"] is not None]


def wasm_answers(tmp_path: Path) -> list[Any]:
    """The calls through the WASM host's request path: the request's bytes
    parsed and performed as the host does, on a gene's memory."""
    out: list[Any] = []
    with MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{tmp_path / 'wasm'}.db",
                          clock=ManualClock("2026-03-01T12:00:00Z")) as store:
        store.create_agent("a", 1 << 30)
        memory = store.for_gene("a", GENE_ID, "calls")
        for op, request in SAME_WASM:
            try:
                raw = requests.perform(op, memory, requests.decode(json.dumps(request).encode()))
                out.append(shown_json(json.loads(raw)))
            except AgentMemoryError as exc:
                out.append(["error", exc.code.value, exc.message])
    return out


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_same_calls_through_every_bridge_give_the_same_answers(tmp_path: Path) -> None:
    python = run(tmp_path, registered(tmp_path, "same_py", SAME_PY))
    node = run(tmp_path, registered(tmp_path, "same_js", SAME_JS, file="index.js"))
    wasm = wasm_answers(tmp_path)
    assert python == node == wasm
    assert python[:3] == [["c/k", "v", "CACHE", False], ["c/r", "r", "PREFERENCE", True],
                          ["c/k", "v", "CACHE", False]]
    errors = [answer for answer in python if answer and answer[0] == "error"]
    assert [e[1] for e in errors] == ["MEMORY_INVALID_INPUT"] * 3 + ["MEMORY_NOT_FOUND"]
    assert python[-1] is None
