"""The WAT test genes end to end through run_wasm_gene, on a real store:
the remembered preference, each gene under its own v2 id, one gene per result."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import wasmtime

from rotifer.genes.errors import GeneFailed, GeneRejected
from rotifer.genes.wasm import GeneInstance, Limits, prepare, run_wasm_gene
from rotifer.memory import DeniedMemory, MemoryStore
from tests.audit_reading import audit_lines

from .conftest import AGENT, gene, gene_id

FORMATTER = gene_id("formatter")


def prefs(store: MemoryStore, input: object, *, as_gene: str = FORMATTER,
          domain: str = "formatter") -> object:
    return run_wasm_gene(gene("prefs"), input, store.for_gene(AGENT, as_gene, domain))


# -- the preference example ----------------------------------------------------------


def test_prefs_defaults_to_two_then_remembers(store: MemoryStore) -> None:
    assert prefs(store, {}) == {"indent": 2}
    assert prefs(store, {"indent": 4}) == {"indent": 4}
    assert prefs(store, {}) == {"indent": 4}
    assert prefs(store, {"indent": 8, "code": "x"}) == {"indent": 8}
    assert prefs(store, {"code": "y"}) == {"indent": 8}


def test_prefs_survive_closing_and_reopening_the_store(rotifer_dir: Path) -> None:
    with MemoryStore.open(rotifer_dir) as store:
        store.create_agent(AGENT)
        prefs(store, {"indent": 3})
    with MemoryStore.open(rotifer_dir) as store:
        assert prefs(store, {}) == {"indent": 3}
        entry = store.for_gene(AGENT, FORMATTER, "formatter").read_memory("formatter/indent")
    assert entry is not None
    assert entry.value == b"3"  # decimal text, as the seed's example stores it
    assert entry.category == "PREFERENCE"


def test_the_gene_acts_under_its_own_v2_id(store: MemoryStore, rotifer_dir: Path) -> None:
    prefs(store, {"indent": 4})
    entry = store.for_gene(AGENT, FORMATTER, "formatter").read_memory("formatter/indent")
    assert entry is not None and entry.created_by == FORMATTER
    # a better formatter in the same domain finds the saved indent ...
    better = gene_id("better formatter")
    assert prefs(store, {}, as_gene=better) == {"indent": 4}
    entry = store.for_gene(AGENT, FORMATTER, "formatter").read_memory("formatter/indent")
    assert entry is not None
    assert (entry.created_by, entry.last_accessed_by) == (FORMATTER, FORMATTER)
    # ... and its own write keeps the creator but records who touched it
    assert prefs(store, {"indent": 6}, as_gene=better) == {"indent": 6}
    written = [line for line in audit_lines(rotifer_dir) if line["action"] in ("write", "update")]
    assert [line["actor"] for line in written] == [FORMATTER, better]


def test_a_gene_in_another_domain_is_refused_and_passes_the_body_on(store: MemoryStore) -> None:
    prefs(store, {"indent": 4})
    with pytest.raises(GeneRejected) as info:
        prefs(store, {}, as_gene=gene_id("linter"), domain="linter")
    assert info.value.code == "MEMORY_ACCESS_DENIED"
    assert "readScope is SAME_DOMAIN" in info.value.message


def test_a_gene_without_a_v2_id_gets_minus_two(store: MemoryStore, rotifer_dir: Path) -> None:
    memory = store.for_gene(AGENT, None, "formatter")
    for input in ({}, {"indent": 4}):
        with pytest.raises(GeneRejected) as info:
            run_wasm_gene(gene("prefs"), input, memory)
        assert info.value.code == "MEMORY_ACCESS_DENIED"
        assert "no v2 id" in info.value.message
    assert [line["operation"] for line in audit_lines(rotifer_dir)
            if line["action"] == "access_denied"] == ["read", "write"]
    assert store.deployer(AGENT).list() == []


def test_rotifer_run_memory_is_refused_with_minus_two() -> None:
    with pytest.raises(GeneRejected) as info:
        run_wasm_gene(gene("prefs"), {"indent": 4}, DeniedMemory())
    assert info.value.code == "MEMORY_ACCESS_DENIED"


def test_rotifer_test_style_memory_is_empty_and_dropped(store: MemoryStore) -> None:
    """What ``rotifer test`` does: a fresh agent memory shared by all cases, then dropped."""
    store.create_agent("test-memory")
    memory = store.for_gene("test-memory", FORMATTER, "formatter")
    assert run_wasm_gene(gene("prefs"), {}, memory) == {"indent": 2}
    assert run_wasm_gene(gene("prefs"), {"indent": 5}, memory) == {"indent": 5}
    assert run_wasm_gene(gene("prefs"), {}, memory) == {"indent": 5}
    store.drop_agent("test-memory")
    assert not store.has_agent("test-memory")
    assert prefs(store, {}) == {"indent": 2}  # the real agent was never touched


# -- one gene per result ---------------------------------------------------------------


def probe(store: MemoryStore, name: str, **limits: object) -> dict:
    memory = store.for_gene(AGENT, gene_id(name), "probe")
    if limits:
        with GeneInstance(prepare(gene(name)), memory, Limits(**limits)) as inst:  # type: ignore[arg-type]
            result = inst.express({})
    else:
        result = run_wasm_gene(gene(name), {}, memory)
    assert isinstance(result, dict)
    return result


def error(code: str, message: str) -> dict:
    return {"__rotifer_error": {"code": code, "message": message}}


def test_minus_one_out_too_small(store: MemoryStore) -> None:
    out = probe(store, "err_out_small")
    written = out["written"]
    assert written > 200
    assert out["read"] == {"result": -1, "body": error(
        "MEMORY_INVALID_INPUT",
        f"out is too small for the response: it needs {written} bytes, out_cap is 200")}


def test_minus_two_access_denied(store: MemoryStore, rotifer_dir: Path) -> None:
    out = probe(store, "err_denied")
    assert out["result"] == -2
    assert out["body"]["__rotifer_error"]["code"] == "MEMORY_ACCESS_DENIED"
    assert "DEPLOYER_CONFIGURED" in out["body"]["__rotifer_error"]["message"]
    assert store.deployer(AGENT).list() == []
    assert [line["action"] for line in audit_lines(rotifer_dir)] == ["access_denied"]


def test_minus_eight_quota_exceeded(rotifer_dir: Path) -> None:
    with MemoryStore.open(rotifer_dir) as store:
        store.create_agent(AGENT, quota_bytes=1024)
        out = probe(store, "err_quota")
        assert out["result"] == -8
        assert out["body"]["__rotifer_error"]["code"] == "MEMORY_QUOTA_EXCEEDED"
        assert store.usage(AGENT) == (0, 1024)


def test_minus_ten_invalid_input(store: MemoryStore) -> None:
    assert probe(store, "err_invalid") == {"result": -10, "body": error(
        "MEMORY_INVALID_INPUT", "unknown field(s) in the readMemory request: colour")}


def test_minus_twelve_not_found(store: MemoryStore) -> None:
    assert probe(store, "err_not_found") == {"result": -12, "body": error(
        "MEMORY_NOT_FOUND", "no memory entry 'probe/never-written'")}


def test_minus_thirteen_storage_error(store: MemoryStore) -> None:
    memory = store.for_gene(AGENT, gene_id("err_storage"), "probe")
    store.close()
    out = run_wasm_gene(gene("err_storage"), {}, memory)
    assert out["result"] == -13
    assert out["body"]["__rotifer_error"]["code"] == "MEMORY_STORAGE_ERROR"


def test_minus_thirteen_when_the_database_file_is_corrupted(rotifer_dir: Path) -> None:
    with MemoryStore.open(rotifer_dir) as store:
        store.create_agent(AGENT)
        memory = store.for_gene(AGENT, gene_id("err_storage"), "probe")
        # the store is open; what is underneath it breaks
        store.backend.conn.execute("DROP TABLE memory_entries")  # type: ignore[attr-defined]
        out = run_wasm_gene(gene("err_storage"), {}, memory)
    assert out["result"] == -13
    assert "no such table" in out["body"]["__rotifer_error"]["message"]


def test_minus_four_after_the_host_call_budget(store: MemoryStore) -> None:
    out = probe(store, "err_budget", max_host_calls=25)
    assert out == {"calls": 26, "probe": {"result": -4, "body": None}}


def test_minus_four_when_fuel_runs_low(store: MemoryStore) -> None:
    out = probe(store, "err_budget", fuel=500_000)
    assert out["probe"] == {"result": -4, "body": None}
    # each call costs host_call_fuel plus its request bytes, and a reserve is kept
    assert 20 <= out["calls"] <= 50


def test_minus_four_once_the_deadline_has_passed(store: MemoryStore) -> None:
    """Past the (soft) deadline a host call returns -4.  The grace before the hard
    stop is an hour here, not 0.1 s, so a loaded machine that pauses the gene
    between its -4 and its return cannot make the trap win."""
    memory = store.for_gene(AGENT, gene_id("err_budget"), "probe")
    limits = Limits(deadline_s=0.2, fuel=10**13, grace_s=3600.0)
    with GeneInstance(prepare(gene("err_budget")), memory, limits) as inst:
        out = inst.express({})
    assert out["probe"] == {"result": -4, "body": None}
    assert out["calls"] > 1


def test_the_budget_never_lets_a_refused_call_touch_memory(store: MemoryStore,
                                                          rotifer_dir: Path) -> None:
    memory = store.for_gene(AGENT, gene_id("writer"), "probe")
    limits = Limits(max_host_calls=3)
    with GeneInstance(prepare(gene("writer")), memory, limits) as inst, \
            pytest.raises(GeneFailed, match=r"returned error code -4 \(the run's deadline"):
        inst.express({"id": 1, "n": 10})
    assert sorted(e.key for e in store.deployer(AGENT).list()) == ["par/1/0", "par/1/1", "par/1/2"]


# -- rejection -----------------------------------------------------------------------------


def test_a_lone_rotifer_error_output_is_a_rejection(store: MemoryStore) -> None:
    with pytest.raises(GeneRejected) as info:
        run_wasm_gene(gene("reject"), {"indent": "four"}, DeniedMemory())
    assert (info.value.code, info.value.message) == ("INVALID_INPUT",
                                                     "indent must be a whole number")
    assert str(info.value) == "INVALID_INPUT: indent must be a whole number"


def test_prefs_value_written_is_base64_of_decimal_text(store: MemoryStore) -> None:
    prefs(store, {"indent": 1234567})
    entry = store.for_gene(AGENT, FORMATTER, "formatter").read_memory("formatter/indent")
    assert entry is not None
    assert base64.b64encode(entry.value) == base64.b64encode(b"1234567")
    assert prefs(store, {}) == {"indent": 1234567}


def test_run_wasm_code_runs_the_bytes_it_is_given_not_the_file(store: MemoryStore,
                                                               tmp_path: Path) -> None:
    """The agent runner passes Gene.code, the bytes the v2 id was computed from."""
    from rotifer.genes.wasm import run_wasm_code

    folder = tmp_path / "formatter"
    folder.mkdir()
    code = gene("prefs").read_bytes()
    (folder / "gene.wat").write_bytes(gene("reject").read_bytes())  # changed since loading
    memory = store.for_gene(AGENT, FORMATTER, "formatter")
    assert run_wasm_code(code, "gene.wat", {"indent": 5}, memory, name="formatter") == {"indent": 5}
    wasm = bytes(wasmtime.wat2wasm(code.decode()))
    assert run_wasm_code(wasm, "gene.wasm", {}, memory, name="formatter") == {"indent": 5}
