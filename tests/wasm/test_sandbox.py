"""The sandbox: fuel, deadlines, traps, bad modules, bad outputs and parallel runs.

Nothing here may crash or hang the host; every failure is a GeneFailed
(or GeneRejected) with a message that says what happened.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import wasmtime

from rotifer.genes.errors import GeneFailed, GeneRejected
from rotifer.genes.wasm import GeneInstance, Limits, prepare, run_wasm_gene
from rotifer.genes.wasm.limits import DEFAULT_DEADLINE_S, DEFAULT_FUEL
from rotifer.memory import DeniedMemory, MemoryStore
from tests.audit_reading import audit_lines

from .conftest import AGENT, ROOMY, gene, gene_id, open_harness


def wat(tmp_path: Path, text: str, name: str = "gene.wat") -> Path:
    """A gene folder ``mygene/`` holding ``text`` as its code file."""
    path = tmp_path / "mygene" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def module(tmp_path: Path, body: str, imports: str = "", memory: str = '(memory (export "memory") 1)'
           ) -> Path:
    return wat(tmp_path, f"(module {imports} {memory} {body})")


# -- runaway genes ---------------------------------------------------------------------


def test_an_infinite_loop_is_stopped_by_fuel() -> None:
    with pytest.raises(GeneFailed, match=r"loop ran out of fuel \(1000000 units\)"):
        run_wasm_gene(gene("loop"), {}, DeniedMemory(), fuel=1_000_000)


def test_an_infinite_loop_is_stopped_by_the_deadline() -> None:
    with pytest.raises(GeneFailed, match=r"loop ran past its deadline of 0.2 s"):
        run_wasm_gene(gene("loop"), {}, DeniedMemory(), deadline_s=0.2, fuel=10**15)


def test_default_fuel_stops_a_loop_well_before_the_default_deadline() -> None:
    """DEFAULT_FUEL is worth well under DEFAULT_DEADLINE_S of this machine's CPU.

    Measured in the thread's CPU time, which a loaded machine does not stretch
    the way it stretches the wall clock (load 13 on 2 cores once made a wall
    clock deadline win the race), with the deadline out of the way."""
    cpu = time.thread_time()
    with pytest.raises(GeneFailed, match=r"ran out of fuel \(2000000000 units\)"):
        run_wasm_gene(gene("loop"), {}, DeniedMemory(), deadline_s=3600.0)
    cpu = time.thread_time() - cpu
    assert DEFAULT_FUEL == 2_000_000_000
    assert cpu < DEFAULT_DEADLINE_S / 2, f"the default fuel took {cpu:.1f} s of CPU"


def test_a_start_function_that_never_returns_is_stopped(tmp_path: Path) -> None:
    path = module(tmp_path, '(func $s (loop $l (br $l))) (start $s)'
                            '(func (export "express") (param i32 i32) (result i32) i32.const 0)')
    with pytest.raises(GeneFailed, match="ran out of fuel"):
        run_wasm_gene(path, {}, DeniedMemory(), fuel=1_000_000)


def test_deep_recursion_is_a_trap(tmp_path: Path) -> None:
    path = module(tmp_path, '(func $f (param i32) (result i32) (call $f (local.get 0)))'
                            '(func (export "express") (param i32 i32) (result i32) '
                            '(call $f (local.get 0)))')
    with pytest.raises(GeneFailed, match="trapped: wasm trap: call stack exhausted"):
        run_wasm_gene(path, {}, DeniedMemory())


@pytest.mark.parametrize(("input", "message"), [
    ({}, "wasm trap: wasm `unreachable` instruction executed"),
    ({"oob": True}, "wasm trap: out of bounds memory access"),
])
def test_traps_are_gene_failures(input: object, message: str) -> None:
    with pytest.raises(GeneFailed) as info:
        run_wasm_gene(gene("trap"), input, DeniedMemory())
    assert info.value.message == f"trap trapped: {message}"


def test_memory_cannot_grow_past_the_limit(tmp_path: Path) -> None:
    path = module(tmp_path, '(data (i32.const 16) "{\\"grew\\":false}\\00")'
                            '(data (i32.const 48) "{\\"grew\\":true}\\00")'
                            '(func (export "express") (param i32 i32) (result i32) '
                            '(if (result i32) (i32.eq (memory.grow (i32.const 5000)) (i32.const -1))'
                            '  (then (i32.const 16)) (else (i32.const 48))))')
    assert run_wasm_gene(path, {}, DeniedMemory()) == {"grew": False}  # 5000 pages > 256 MiB


# -- modules that are not genes -----------------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ('(module (func (export "express") (param i32 i32) (result i32) i32.const 0))',
     "must export its linear memory as 'memory'"),
    ('(module (memory (export "memory") 1))', "must export express(ptr: i32, len: i32) -> i32"),
    ('(module (memory (export "memory") 1) (func (export "express") (param i32) (result i32) '
     'i32.const 0))', "must export express"),
    ('(module (import "env" "f" (func)) (memory (export "memory") 1) '
     '(func (export "express") (param i32 i32) (result i32) i32.const 0))',
     "imports env.f, which the host does not provide"),
    ('(module (import "rotifer" "readMemory" (func (param i32) (result i32))) '
     '(memory (export "memory") 1) (func (export "express") (param i32 i32) (result i32) '
     'i32.const 0))', "imports rotifer.readMemory with the wrong type"),
    ('(module (import "rotifer" "fetch" (func)) (memory (export "memory") 1) '
     '(func (export "express") (param i32 i32) (result i32) i32.const 0))',
     "imports rotifer.fetch, which the host does not provide"),
    ('(module (memory (export "memory") 1) (func (export "express") (param i32 i32) (result i32) '
     'i32.const 0) (func (export "alloc") (result i32) i32.const 0))',
     "alloc must be alloc(len: i32) -> i32"),
])
def test_abi_violations_are_refused_before_running(tmp_path: Path, text: str,
                                                   message: str) -> None:
    with pytest.raises(GeneFailed, match="does not follow the rotifer WASM ABI") as info:
        run_wasm_gene(wat(tmp_path, text), {}, DeniedMemory())
    assert message in info.value.message


def test_bad_wat_and_bad_wasm(tmp_path: Path) -> None:
    with pytest.raises(GeneFailed, match=r"gene\.wat is not valid WAT"):
        run_wasm_gene(wat(tmp_path, "(module (func"), {}, DeniedMemory())
    with pytest.raises(GeneFailed, match=r"gene\.wat is not a valid WebAssembly module: .*type mismatch"):
        run_wasm_gene(wat(tmp_path, "(module (func $f (result i32)))"), {}, DeniedMemory())
    garbage = tmp_path / "gene.wasm"
    garbage.write_bytes(b"\x00asm\x01\x00\x00\x00\xff\xff")
    with pytest.raises(GeneFailed, match=r"gene\.wasm is not a valid WebAssembly module"):
        run_wasm_gene(garbage, {}, DeniedMemory())
    with pytest.raises(GeneFailed, match="cannot read"):
        run_wasm_gene(tmp_path / "missing.wasm", {}, DeniedMemory())


# -- inputs and outputs --------------------------------------------------------------------


def harness(store: MemoryStore, harness_module: wasmtime.Module, **limits: object
            ) -> GeneInstance:
    memory = store.for_gene(AGENT, gene_id("harness"), "probe")
    return open_harness(harness_module, memory, Limits(**limits) if limits else ROOMY)  # type: ignore[arg-type]


def test_the_input_lands_at_offset_zero_without_alloc(store: MemoryStore,
                                                      harness_module: wasmtime.Module) -> None:
    with harness(store, harness_module) as inst:
        assert inst.express({"a": "ü"}) == {}
        assert inst.guest.read(0, 12) == '{"a":"ü"}'.encode() + bytes(2)


ECHO = ('(func (export "express") (param $p i32) (param $n i32) (result i32)'
        ' (i32.store8 (i32.add (local.get $p) (local.get $n)) (i32.const 0)) (local.get $p))')


def test_a_big_input_grows_the_memory_of_a_gene_without_alloc(tmp_path: Path) -> None:
    big = {"text": "x" * 200_000}
    assert run_wasm_gene(module(tmp_path, ECHO), big, DeniedMemory()) == big


@pytest.mark.parametrize(("result", "message"), [
    (-7, "harness returned error code -7"),
    (-2, "harness returned error code -2 (MEMORY_ACCESS_DENIED)"),
    (-4, "harness returned error code -4 (the run's deadline or the call's budget is used up)"),
    (0x7FFF_0000, "output at 2147418112 is not NUL-terminated within its memory"),
])
def test_bad_express_results(store: MemoryStore, harness_module: wasmtime.Module, result: int,
                             message: str) -> None:
    with harness(store, harness_module) as inst:
        inst.call("set_result", result)
        with pytest.raises(GeneFailed) as info:
            inst.express({})
    assert message in info.value.message


@pytest.mark.parametrize(("raw", "outcome"), [
    (b"{}", {}),
    (b'[1, "two", null]', [1, "two", None]),
    (b'{"__rotifer_error": {"code": "X"}, "other": 1}', {"__rotifer_error": {"code": "X"},
                                                        "other": 1}),
    (b"not json", GeneFailed),
    (b"\xff\xfe", GeneFailed),
    (b"", GeneFailed),
])
def test_outputs(store: MemoryStore, harness_module: wasmtime.Module, raw: bytes,
                 outcome: object) -> None:
    with harness(store, harness_module) as inst:
        inst.guest.write(40_000, raw + b"\x00")
        inst.call("set_result", 40_000)
        if outcome is GeneFailed:
            with pytest.raises(GeneFailed, match="output is not UTF-8 JSON"):
                inst.express({})
        else:
            assert inst.express({}) == outcome


def test_an_output_without_nul_before_the_end_of_memory(store: MemoryStore,
                                                        harness_module: wasmtime.Module) -> None:
    with harness(store, harness_module) as inst:
        size = inst.guest.size()
        inst.guest.write(size - 100, b"x" * 100)
        inst.call("set_result", size - 100)
        with pytest.raises(GeneFailed, match="not NUL-terminated"):
            inst.express({})


def test_an_output_longer_than_the_limit(store: MemoryStore,
                                         harness_module: wasmtime.Module) -> None:
    with harness(store, harness_module, max_output_bytes=10) as inst:
        inst.guest.write(40_000, b'"0123456789"\x00')
        inst.call("set_result", 40_000)
        with pytest.raises(GeneFailed, match="longer than 10 bytes"):
            inst.express({})


@pytest.mark.parametrize(("body", "code", "message"), [
    ({"code": "INVALID_INPUT", "message": "no"}, "INVALID_INPUT", "no"),
    ({"code": "MEMORY_NOT_FOUND"}, "MEMORY_NOT_FOUND", ""),
    ("just text", "GENE_REJECTED", ""),
    ({"code": 5, "message": 6}, "GENE_REJECTED", ""),
])
def test_rejections(store: MemoryStore, harness_module: wasmtime.Module, body: object,
                    code: str, message: str) -> None:
    import json

    with harness(store, harness_module) as inst:
        inst.guest.write(40_000, json.dumps({"__rotifer_error": body}).encode() + b"\x00")
        inst.call("set_result", 40_000)
        with pytest.raises(GeneRejected) as info:
            inst.express({})
    assert (info.value.code, info.value.message) == (code, message)


def test_input_that_is_not_json(store: MemoryStore, harness_module: wasmtime.Module) -> None:
    with harness(store, harness_module) as inst, pytest.raises(GeneFailed, match="not JSON"):
        inst.express({"x": {1, 2}})


def test_alloc_returning_a_pointer_outside_memory(tmp_path: Path) -> None:
    path = module(tmp_path, '(func (export "alloc") (param i32) (result i32) i32.const -8)'
                            '(func (export "express") (param i32 i32) (result i32) i32.const 0)')
    with pytest.raises(GeneFailed, match=r"input \(7 bytes at 4294967288\) does not fit mygene's memory"):
        run_wasm_gene(path, {"x": 1}, DeniedMemory())


def test_alloc_that_traps(tmp_path: Path) -> None:
    path = module(tmp_path, '(func (export "alloc") (param i32) (result i32) unreachable)'
                            '(func (export "express") (param i32 i32) (result i32) i32.const 0)')
    with pytest.raises(GeneFailed, match="mygene trapped"):
        run_wasm_gene(path, {}, DeniedMemory())


def test_limits_must_make_sense() -> None:
    with pytest.raises(ValueError):
        Limits(deadline_s=0)
    with pytest.raises(ValueError):
        Limits(fuel=0)


# -- parallel runs ----------------------------------------------------------------------------


def test_parallel_genes_each_under_their_own_id_keep_the_store_consistent(
        store: MemoryStore, rotifer_dir: Path) -> None:
    """What a Par composition of compiled genes may do: run at the same time."""
    genes = 4
    writes = 40
    prepare(gene("writer"))  # compile once up front, as the agent runner would
    results: dict[int, object] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            memory = store.for_gene(AGENT, gene_id(f"writer-{i}"), "probe")
            results[i] = run_wasm_gene(gene("writer"), {"id": i, "n": writes}, memory)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(genes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == {i: {"written": writes} for i in range(genes)}
    entries = store.deployer(AGENT).list()
    assert len(entries) == genes * writes
    for e in entries:
        i = int(e.key.split("/")[1])
        assert e.created_by == gene_id(f"writer-{i}")
    used, _ = store.usage(AGENT)
    assert used == sum(e.size for e in entries)
    assert len([line for line in audit_lines(rotifer_dir) if line["action"] == "write"]) == \
        genes * writes


def test_a_trap_in_one_parallel_run_does_not_disturb_another(store: MemoryStore) -> None:
    outcomes: dict[str, object] = {}

    def run(name: str, input: object) -> None:
        memory = store.for_gene(AGENT, gene_id(name), "formatter")
        try:
            outcomes[name] = run_wasm_gene(gene(name), input, memory)
        except GeneFailed as exc:
            outcomes[name] = exc.message

    threads = [threading.Thread(target=run, args=("trap", {})),
               threading.Thread(target=run, args=("prefs", {"indent": 7}))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == {"trap": "trap trapped: wasm trap: wasm `unreachable` instruction executed",
                        "prefs": {"indent": 7}}
