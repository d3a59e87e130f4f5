"""One dispatcher for every bridge (rotifer.genes.calls): each of the four
calls carried out, each refusal, the error mapping, the strict fields of a
WASM request, the probe for a gene refused outright, one vocabulary, and the
Python bridge's short reply -- on a real SQLite store.  Through the real
bridges: test_calls_bridges.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rotifer.genes import calls
from rotifer.genes.calls import Op
from rotifer.genes.contain import python_host
from rotifer.genes.contain.pychild import _compact
from rotifer.genes.contain.replies import NOTHING, ShortEntry, entry_line
from rotifer.genes.node import bridge
from rotifer.genes.wasm import abi, requests
from rotifer.memory import (
    AgentMemoryError,
    ErrorCode,
    GeneMemoryAccess,
    ManualClock,
    MemoryEntry,
    MemoryStore,
)

GENE_ID = "v2:" + "ab" * 32
KEEP = {"maxRetentionDays": 5, "autoDeleteOnTermination": False,
        "anonymizationSupported": False}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / ".rotifer", clock=ManualClock("2026-03-01T12:00:00Z")) as s:
        s.create_agent("a", 1 << 30)
        yield s


@pytest.fixture
def memory(store: MemoryStore) -> GeneMemoryAccess:
    return store.for_gene("a", GENE_ID, "calls")


def as_is(fields: dict[str, Any]) -> dict[str, Any]:
    return fields


def refusal(memory: GeneMemoryAccess, op: Op, fields: Any, decode: Any = as_is) -> tuple[str, str]:
    with pytest.raises(AgentMemoryError) as caught:
        calls.serve(memory, op, decode, fields)
    return caught.value.code.value, caught.value.message


# -- each call ---------------------------------------------------------------------


def test_each_call_is_carried_out_on_the_genes_memory(memory: GeneMemoryAccess) -> None:
    written = calls.serve(memory, Op.WRITE, as_is,
                          {"key": "c/k", "value": b"v", "category": "CACHE"})
    assert isinstance(written, MemoryEntry)
    assert (written.key, written.value, written.category.value) == ("c/k", b"v", "CACHE")
    assert calls.serve(memory, Op.READ, as_is, {"key": "c/k"}) == written
    assert calls.serve(memory, Op.READ, as_is, {"key": "c/k", "category": "PATTERN"}) is None
    assert calls.serve(memory, Op.QUERY, as_is, {"filter": {"category": "CACHE"}}) == [written]
    assert calls.serve(memory, Op.QUERY, as_is, {}) == [written]
    assert calls.serve(memory, Op.DELETE, as_is, {"key": "c/k"}) is None
    assert calls.serve(memory, Op.READ, as_is, {"key": "c/k"}) is None


def test_a_retention_policy_left_out_is_unset_and_an_explicit_null_clears_it(
        memory: GeneMemoryAccess) -> None:
    calls.serve(memory, Op.WRITE, as_is, {"key": "r", "value": b"1", "category": "PREFERENCE",
                                          "retentionPolicy": KEEP})
    kept = calls.serve(memory, Op.WRITE, as_is, {"key": "r", "value": b"2",
                                                 "category": "PREFERENCE"})
    assert isinstance(kept, MemoryEntry) and kept.retention_policy is not None
    cleared = calls.serve(memory, Op.WRITE, as_is, {"key": "r", "value": b"3",
                                                    "category": "PREFERENCE",
                                                    "retentionPolicy": None})
    assert isinstance(cleared, MemoryEntry) and cleared.retention_policy is None


# -- the error mapping -------------------------------------------------------------


def test_the_stores_refusals_pass_unchanged(memory: GeneMemoryAccess) -> None:
    assert refusal(memory, Op.DELETE, {"key": "c/none"}) == (
        "MEMORY_NOT_FOUND", "no memory entry 'c/none'")
    code, _ = refusal(memory, Op.WRITE, {"key": "c/k", "value": b"v", "category": "NOPE"})
    assert code == "MEMORY_INVALID_INPUT"
    code, _ = refusal(memory, Op.READ, {})  # a key left out is None: the store refuses it
    assert code == "MEMORY_INVALID_INPUT"


@pytest.mark.parametrize("kind", [TypeError, ValueError, AttributeError])
def test_arguments_of_the_wrong_shape_are_invalid_input(memory: GeneMemoryAccess,
                                                        kind: type[Exception]) -> None:
    def decode(fields: Any) -> Any:
        raise kind("not that shape")

    assert refusal(memory, Op.READ, {}, decode) == ("MEMORY_INVALID_INPUT", "not that shape")


def test_anything_else_is_rotifers_own_failure_and_propagates(memory: GeneMemoryAccess) -> None:
    def decode(fields: Any) -> Any:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        calls.serve(memory, Op.READ, decode, {})


def test_a_refusal_of_the_bridges_own_decoding_is_the_genes_answer(
        memory: GeneMemoryAccess) -> None:
    def decode(fields: Any) -> Any:
        raise calls.invalid("value must be bytes")

    assert refusal(memory, Op.WRITE, {}, decode) == ("MEMORY_INVALID_INPUT",
                                                     "value must be bytes")


def test_replies_of_the_json_lines_bridges(memory: GeneMemoryAccess) -> None:
    entry = memory.write_memory("c/k", b"v", "CACHE")
    assert calls.ok_reply(entry) == {"ok": entry.to_json()}
    assert calls.ok_reply([entry]) == {"ok": [entry.to_json()]}
    assert calls.ok_reply(None) == {"ok": None}
    error = AgentMemoryError(ErrorCode.NOT_FOUND, "gone")
    assert calls.error_reply(error) == {"error": {"code": "MEMORY_NOT_FOUND",
                                                  "message": "gone"}}


# -- strict fields (the WASM requests) ---------------------------------------------


def test_exact_fields_takes_the_required_and_the_optional_ones() -> None:
    assert calls.exact_fields(Op.READ, {"key": "k"}) == {"key": "k"}
    full = {"key": "k", "value": "", "category": "CACHE", "accessPolicy": None,
            "retentionPolicy": None}
    assert calls.exact_fields(Op.WRITE, full) == full


@pytest.mark.parametrize(("op", "request_", "message"), [
    (Op.READ, [], "a readMemory request must be a JSON object"),
    (Op.READ, {"key": "k", "colour": 1}, "unknown field(s) in the readMemory request: colour"),
    (Op.WRITE, {"key": "k"}, "the writeMemory request is missing value, category"),
    (Op.DELETE, {"key": "k", "category": "CACHE"},
     "unknown field(s) in the deleteMemory request: category"),
])
def test_exact_fields_refuses_anything_else(op: Op, request_: Any, message: str) -> None:
    with pytest.raises(AgentMemoryError) as caught:
        calls.exact_fields(op, request_)
    assert (caught.value.code, caught.value.message) == (ErrorCode.INVALID_INPUT, message)


# -- a gene refused outright -------------------------------------------------------


@pytest.mark.parametrize("op", list(Op))
def test_the_probe_finds_a_gene_refused_whatever_it_asks(store: MemoryStore, op: Op) -> None:
    denied = calls.probe_denied(op, store.for_gene("a", None, "calls"))
    assert denied is not None and denied.code is ErrorCode.ACCESS_DENIED
    assert calls.probe_denied(op, store.for_gene("a", GENE_ID, "calls")) is None


# -- one vocabulary ----------------------------------------------------------------


def test_every_bridge_speaks_the_four_calls_and_only_those() -> None:
    assert set(python_host.OPS.values()) == set(Op)
    assert python_host.CALLS.ops == frozenset(python_host.OPS)
    assert bridge.CALLS.ops == set(Op)
    assert bridge.CALLS.fields == {"type", "op", "key", "category", "value", "accessPolicy",
                                   "retentionPolicy", "filter"}
    assert tuple(Op) == abi.MEMORY_FUNCTIONS
    assert set(requests.FIELDS_OF) == set(Op)


# -- the Python bridge's short reply: built and read by one definition ----------------


def test_the_short_reply_reads_back_as_the_entry(memory: GeneMemoryAccess) -> None:
    for key, value in [("c/k", b"v"), ("c/\u043a\"\\", b"\x00\xff" * 100), ("c/e", b"")]:
        entry = memory.write_memory(key, value, "CACHE")
        for with_value in (True, False):
            line = entry_line(entry, with_value)
            assert line is not None and line.endswith(b"\n")
            doc = json.loads(line)["ok"]
            assert len(doc) == len(ShortEntry._fields)
            assert ShortEntry(*doc).entry_id == entry.entry_id
            got = _compact(doc, key, None if with_value else value)
            assert got == entry and got.to_json() == entry.to_json()
    kept = memory.write_memory("c/r", b"r", "CACHE", None, KEEP)
    assert entry_line(kept, True) is None  # a retention policy goes as the full object
    assert json.loads(NOTHING) == {"ok": None}
