"""One memory host call against a bare wasmtime host call plus the store op.

Both modules run on rotifer's engine (fuel and epoch interruption on), each
in its own store with the same budget:

- bare: a tiny module whose export calls an import that does nothing,
  defined with wasmtime-py's ``Linker.define_func`` (the usual way);
- bare C callback (information): the same no-op import defined the way
  rotifer defines its memory calls (``rotifer.genes.wasm.rawcall``), which
  skips wasmtime-py's generic trampoline;
- rotifer: a module whose export calls ``rotifer.readMemory`` with a read
  request for a 100-byte entry already in guest memory.

Each export loops inside the guest, calling its import ``n`` times, so the
figure is one host call round trip (guest -> host -> guest), not the much
dearer call from Python into the guest.  The target compares the memory host
call with the bare call *plus* the store operation alone (``read_memory`` of
the same entry), all measured in the same rounds.
"""

from __future__ import annotations

import json
from pathlib import Path

import wasmtime

from rotifer.genes.wasm import GeneInstance, Limits, rawcall
from rotifer.genes.wasm.engine import get_engine
from rotifer.memory import MemoryStore

from . import memory
from .report import Result
from .timing import Settings, compare

BARE_WAT = """
(module
  (import "bench" "nop" (func $nop (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "call") (param $n i32) (param i32 i32 i32 i32) (result i32)
    (local $r i32)
    (loop $again
      (local.set $r (call $nop (local.get 1) (local.get 2) (local.get 3) (local.get 4)))
      (local.tee $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $again))
    (local.get $r)))
"""

READ_WAT = """
(module
  (import "rotifer" "readMemory" (func $read (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "express") (param i32 i32) (result i32) (i32.const 0))
  (func (export "call") (param $n i32) (param i32 i32 i32 i32) (result i32)
    (local $r i32)
    (loop $again
      (local.set $r (call $read (local.get 1) (local.get 2) (local.get 3) (local.get 4)))
      (local.tee $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $again))
    (local.get $r)))
"""

ROOMY = Limits(deadline_s=3600.0, fuel=10**15, max_host_calls=10**9)
REQ, OUT, CAP = 1024, 65536, 65536
#: Host calls per call into the guest.
LOOP = 50
#: Rounds per the settings' round, each of one call per operation: a round is
#: then a few milliseconds, short enough that most rounds of every operation
#: run without being preempted on a loaded machine (with longer rounds the
#: longest operation, the host call, was preempted in most of its rounds and
#: its median grew with the load), and many rounds keep the median steady.
ROUNDS_FACTOR = 6


def _nop(a: int, b: int, c: int, d: int) -> int:
    return 0


def _raw_nop(caller: int, a: int, b: int, c: int, d: int) -> int:
    return 0


def _bare(engine: wasmtime.Engine, *, c_callback: bool) -> tuple[wasmtime.Store, wasmtime.Func]:
    """A store and the ``call`` export of BARE_WAT with its no-op import."""
    store = wasmtime.Store(engine)
    store.set_fuel(10**15)
    store.set_epoch_deadline(10**9)
    linker = wasmtime.Linker(engine)
    i32 = wasmtime.ValType.i32()
    ty = wasmtime.FuncType([i32] * 4, [i32])
    if not (c_callback and rawcall.define(linker, "bench", "nop", ty, _raw_nop)):
        linker.define_func("bench", "nop", ty, _nop)
    call = linker.instantiate(store, wasmtime.Module(engine, BARE_WAT)).exports(store)["call"]
    assert isinstance(call, wasmtime.Func)
    return store, call


def run(root: Path, settings: Settings) -> list[Result]:
    engine = get_engine()
    bare_store, bare_call = _bare(engine, c_callback=False)
    raw_store, raw_call = _bare(engine, c_callback=True)
    loop = LOOP if settings.iters >= 10 else 2

    with MemoryStore.open(root) as store:
        agent = "agent"
        memory.populate(store.backend, agent,  # type: ignore[arg-type]
                        memory.standard_rows(agent, 100, 100, 0))
        mem = store.for_gene(agent, memory.GENE, memory.DOMAIN)
        module = wasmtime.Module(engine, READ_WAT)
        with GeneInstance(module, mem, ROOMY, name="bench") as inst:
            request = json.dumps({"key": "r/key"}).encode()
            req_len = len(request)
            inst.guest.write(REQ, request)
            call = inst.instance.exports(inst.store)["call"]
            assert isinstance(call, wasmtime.Func)
            wstore = inst.store
            n = call(wstore, 1, REQ, req_len, OUT, CAP)
            assert n > 0 and json.loads(inst.guest.read(OUT, n))["key"] == "r/key", n

            def reads() -> None:
                for _ in range(loop):
                    mem.read_memory("r/key")

            t = compare({
                "bare": lambda: bare_call(bare_store, loop, REQ, req_len, OUT, CAP),
                "raw": lambda: raw_call(raw_store, loop, REQ, req_len, OUT, CAP),
                "store": reads,
                "host": lambda: call(wstore, loop, REQ, req_len, OUT, CAP),
                "entry": lambda: bare_call(bare_store, 1, REQ, req_len, OUT, CAP),
            }, rounds=settings.rounds * ROUNDS_FACTOR, iters=1)
    per = {name: (v if name == "entry" else v / loop) for name, v in t.items()}
    return [
        Result("wasm", "call from Python into the guest + one no-op host call", per["entry"],
               None, "", "info", None),
        Result("wasm", "bare wasmtime host call (guest -> no-op import -> guest)", per["bare"],
               None, "", "info", None),
        Result("wasm", "bare host call, C callback (as rotifer defines its memory calls)",
               per["raw"], None, "", "info", None),
        Result("wasm", "read_memory 100 B alone (Python)", per["store"], None, "", "info", None),
        Result("wasm", "readMemory host call, 100 B (guest -> rotifer -> guest)", per["host"],
               per["bare"] + per["store"], "bare call + store op", "max", 1.5),
    ]
