"""WASI preview 1 as the host links it, against hand-written modules (no
toolchain needed): command genes that write, exit, flood stdout or sleep,
express genes that import WASI, and every import the host refuses, with the
fix the refusal names."""

from __future__ import annotations

import gc
import struct
import subprocess
import sys
import threading
import weakref
from typing import Any

import pytest
import wasmtime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rotifer.genes.errors import CompileFailed, GeneFailed
from rotifer.genes.wasm import GeneInstance, Limits, run_wasm_code
from rotifer.genes.wasm.compile import check_wasm
from rotifer.genes.wasm.imports import WASI_SIGNATURES
from rotifer.memory import DeniedMemory

WASI = "wasi_snapshot_preview1"


def command(body: str, data: str = "", imports: str = "") -> bytes:
    """A WASI command module: fd_write, proc_exit, poll_oneoff imported; an
    iovec for ``data`` at 8 (ptr 64, len), ``body`` is _start's code."""
    escaped = "".join(f"\\{b:02x}" for b in data.encode())
    length = "".join(f"\\{b:02x}" for b in len(data.encode()).to_bytes(4, "little"))
    return bytes(wasmtime.wat2wasm(f"""
(module
  (import "{WASI}" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "{WASI}" "proc_exit" (func $proc_exit (param i32)))
  (import "{WASI}" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  {imports}
  (memory (export "memory") 2)
  (data (i32.const 8) "\\40\\00\\00\\00")
  (data (i32.const 12) "{length}")
  (data (i32.const 64) "{escaped}")
  (global $result (export "result") (mut i32) (i32.const 0))
  (func (export "_start") {body})
)"""))


def run(code: bytes, input: Any = None, **options: Any) -> Any:
    return run_wasm_code(code, "gene.wasm", input, DeniedMemory(), name="w", **options)


WRITE_DATA = "(drop (call $fd_write (i32.const 1) (i32.const 8) (i32.const 1) (i32.const 16)))"


def test_a_command_gene_that_writes_without_reading_stdin() -> None:
    assert run(command(WRITE_DATA, '{"ok":[1,2]}'), {"x": 1}) == {"ok": [1, 2]}


def test_exit_zero_after_the_output_is_success_and_non_zero_is_a_failure() -> None:
    assert run(command(WRITE_DATA + "(call $proc_exit (i32.const 0))", "[]")) == []
    stderr = "(drop (call $fd_write (i32.const 2) (i32.const 8) (i32.const 1) (i32.const 16)))"
    with pytest.raises(GeneFailed) as caught:
        run(command(stderr + "(call $proc_exit (i32.const 9))", "oh no\nbad"))
    assert caught.value.message == "w exited with code 9; stderr: oh no | bad"


def test_a_command_gene_that_writes_nothing_or_not_json() -> None:
    with pytest.raises(GeneFailed, match="w wrote nothing to stdout"):
        run(command(""))
    with pytest.raises(GeneFailed, match="w's output on stdout is not UTF-8 JSON"):
        run(command(WRITE_DATA, "{nope"))


def test_a_command_gene_can_reject_its_input() -> None:
    from rotifer.genes.errors import GeneRejected

    with pytest.raises(GeneRejected) as caught:
        run(command(WRITE_DATA, '{"__rotifer_error":{"code":"INVALID_INPUT","message":"m"}}'))
    assert str(caught.value) == "INVALID_INPUT: m"


FLOOD = "(loop $forever " + WRITE_DATA + " (br $forever))"


def test_a_command_gene_flooding_stdout_and_ignoring_errors_is_stopped() -> None:
    # Fuel, not the deadline, ends the loop: ~16,000 writes of 100 bytes, past the
    # cap whatever the machine's load (a deadline would race the writes).
    limits = Limits(deadline_s=3600.0, fuel=100_000, max_output_bytes=4096)
    module = wasmtime.Module(_engine(), command(FLOOD, "x" * 100))
    with GeneInstance(module, DeniedMemory(), limits, name="w") as inst, \
            pytest.raises(GeneFailed) as caught:
        inst.start()
    assert caught.value.message == ("w wrote more than 4096 bytes to stdout (the most a WASI "
                                    "command gene's output may be)")
    assert inst.stdout.size <= 4096


def test_poll_oneoff_is_refused_so_a_sleep_cannot_hold_the_host() -> None:
    """A one-hour clock subscription: wasmtime's poll_oneoff would block."""
    sub = ("(i64.store (i32.const 1024) (i64.const 1))"          # userdata
           "(i32.store8 (i32.const 1032) (i32.const 0))"         # tag: clock
           "(i64.store (i32.const 1048) (i64.const 3600000000000))")  # timeout ns
    body = sub + ("(global.set $result (call $poll (i32.const 1024) (i32.const 2048) "
                  "(i32.const 1) (i32.const 4096)))") + WRITE_DATA
    module = wasmtime.Module(_engine(), command(body, "{}"))
    done: list[Any] = []

    def go() -> None:
        with GeneInstance(module, DeniedMemory(), Limits(deadline_s=5.0), name="w") as inst:
            done.append(inst.start())
            done.append(inst.instance.exports(inst.store)["result"].value(inst.store))

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "poll_oneoff held the host thread"
    assert done == [{}, 58]  # ENOTSUP


def test_stdout_of_an_express_gene_goes_to_its_log() -> None:
    wat = f"""
(module
  (import "{WASI}" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 8) "\\40\\00\\00\\00\\0b\\00\\00\\00")
  (data (i32.const 64) "one\\ntwo\\nthr")
  (data (i32.const 200) "{{}}\\00")
  (global $inits (mut i32) (i32.const 0))
  (func (export "_initialize") (global.set $inits (i32.add (global.get $inits) (i32.const 1))))
  (func (export "inits") (result i32) (global.get $inits))
  (func (export "express") (param i32 i32) (result i32)
    (drop (call $fd_write (i32.const 1) (i32.const 8) (i32.const 1) (i32.const 16)))
    (drop (call $fd_write (i32.const 2) (i32.const 8) (i32.const 1) (i32.const 16)))
    (i32.const 200))
)"""
    module = wasmtime.Module(_engine(), wasmtime.wat2wasm(wat))
    logs: list[tuple[int, str]] = []
    with GeneInstance(module, DeniedMemory(), Limits(), name="w",
                      log_sink=lambda level, line: logs.append((level, line))) as inst:
        assert inst.call("inits") == 1
        assert inst.express({}) == {}
    assert logs == [(1, "one"), (1, "two"), (1, "one"), (1, "two"), (1, "thr"), (1, "thr")]


def _engine() -> wasmtime.Engine:
    from rotifer.genes.wasm.engine import get_engine

    return get_engine()


# -- refusals ----------------------------------------------------------------------------

EXPRESS = '(memory (export "memory") 1) (func (export "express") (param i32 i32) (result i32) (i32.const 0))'
REFUSED = [
    ('(import "env" "memset" (func (param i32 i32 i32) (result i32)))' + EXPRESS,
     "imports env.memset, which the host does not provide: clang emitted a call to the C "
     "library's memset; build with -mbulk-memory"),
    ('(import "env" "console.log" (func (param i32)))' + EXPRESS,
     "asc --use console.log=<your function>"),
    ('(import "wasi_unstable" "fd_write" (func (param i32 i32 i32 i32) (result i32)))' + EXPRESS,
     "the host links only WASI preview 1 (wasi_snapshot_preview1); build for wasm32-wasi "
     "(preview 1)"),
    ('(import "wasi:cli/stdout" "get-stdout" (func (result i32)))' + EXPRESS,
     "build for wasm32-wasi (preview 1)"),
    (f'(import "{WASI}" "fd_bogus" (func))' + EXPRESS,
     "it is not a function of WASI preview 1"),
    ('(import "rotifer" "readMemories" (func (param i32 i32 i32 i32) (result i32)))' + EXPRESS,
     "from 'rotifer' it provides only readMemory, writeMemory, queryMemory, deleteMemory "
     "and log"),
    ('(import "mylib" "f" (func))' + EXPRESS, "imports mylib.f, which the host does not provide"),
    ('(import "env" "abort" (func (param i32)))' + EXPRESS,
     "imports env.abort with the wrong type"),
    ('(import "rotifer" "readMemory" (func (param i32 i32 i32 i32) (result i32)))'
     '(memory (export "memory") 1) (func (export "_start"))',
     "it is a WASI command gene (it exports _start and no express), which gets no memory "
     "host functions"),
    ('(memory (export "memory") 1) (func (export "_start") (param i32))',
     "an exported _start must take and return nothing"),
    ('(memory (export "memory") 1)',
     "must export express(ptr: i32, len: i32) -> i32, or be a WASI command that exports "
     "_start() and no express"),
    (EXPRESS + '(func (export "_initialize") (param i32))',
     "an exported _initialize must take and return nothing"),
]


@pytest.mark.parametrize(("wat", "says"), REFUSED, ids=[
    "memset", "asc-console", "wasi-unstable", "preview2", "wasi-unknown", "rotifer-unknown",
    "other", "abort-type", "command-memory", "start-type", "no-entry", "initialize-type"])
def test_a_refusal_names_the_import_and_the_fix(wat: str, says: str) -> None:
    wasm = bytes(wasmtime.wat2wasm(f"(module {wat})"))
    with pytest.raises(CompileFailed) as compiled:
        check_wasm(wasm, "gene.wasm")
    assert says in compiled.value.message
    with pytest.raises(GeneFailed) as ran:
        run(wasm, {})
    assert says in ran.value.message


def test_a_component_is_refused_with_the_fix() -> None:
    component = b"\x00asm\x0d\x00\x01\x00" + b"\x00" * 16
    with pytest.raises(CompileFailed, match=r"is a WebAssembly component .*build for "
                                            r"wasm32-wasi"):
        check_wasm(component, "gene.wasm")
    with pytest.raises(GeneFailed, match="is a WebAssembly component"):
        run(component, {})


def test_an_express_gene_that_exits_fails() -> None:
    wat = f"""
(module
  (import "{WASI}" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (func (export "express") (param i32 i32) (result i32) (call $proc_exit (i32.const 0))
    (i32.const 0)))"""
    with pytest.raises(GeneFailed) as caught:
        run(bytes(wasmtime.wat2wasm(wat)), {})
    assert caught.value.message == "w exited with code 0 (an express gene must return, not exit)"


@pytest.mark.parametrize("shape", ["command", "express"])
def test_a_run_with_wasi_frees_its_store(shape: str) -> None:
    """wasmtime holds the stream callbacks until the store goes; they must not
    keep the store alive (every WASI run would leak its memory)."""
    if shape == "command":
        code = command(WRITE_DATA, "{}")
    else:
        code = bytes(wasmtime.wat2wasm(f"""
(module
  (import "{WASI}" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 100) "{{}}\\00")
  (func (export "express") (param i32 i32) (result i32) (i32.const 100)))"""))
    module = wasmtime.Module(_engine(), code)
    with GeneInstance(module, DeniedMemory(), Limits(), name="w",
                      log_sink=lambda level, line: None) as inst:
        assert (inst.start() if shape == "command" else inst.express({})) == {}
        store = weakref.ref(inst.store)
    del inst
    gc.collect()
    assert store() is None


# -- the host's WASI against wasmtime's and against random arguments ----------------------


def _forwarder() -> str:
    """A module that imports every WASI function with the host's types and
    exports ``call_NAME`` forwarding to it."""
    kinds = {"i": "i32", "I": "i64"}
    lines = []
    for name, (params, results) in WASI_SIGNATURES.items():
        p = " ".join(kinds[c] for c in params)
        r = " ".join(kinds[c] for c in results)
        sig = (f"(param {p})" if p else "") + (f" (result {r})" if r else "")
        args = " ".join(f"(local.get {i})" for i in range(len(params)))
        lines.append(f'(import "{WASI}" "{name}" (func ${name} {sig}))')
        lines.append(f'(func (export "call_{name}") {sig} (call ${name} {args}))')
    imports = [line for line in lines if line.startswith("(import")]
    funcs = [line for line in lines if line.startswith("(func")]
    return ("(module " + " ".join(imports) + ' (memory (export "memory") 1) '
            + " ".join(funcs) + ' (func (export "_start")))')


def test_the_host_wasi_types_are_wasmtimes() -> None:
    """The same module links against wasmtime's own WASI: the types are the standard's."""
    engine = wasmtime.Engine()
    module = wasmtime.Module(engine, wasmtime.wat2wasm(_forwarder()))
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    store = wasmtime.Store(engine)
    store.set_wasi(wasmtime.WasiConfig())
    linker.instantiate(store, module)


def test_stdio_answers_like_a_character_device() -> None:
    module = wasmtime.Module(_engine(), wasmtime.wat2wasm(_forwarder()))
    with GeneInstance(module, DeniedMemory(), Limits(), name="gene-x") as inst:
        assert inst.guest is not None
        assert inst.call("call_args_sizes_get", 100, 104) == 0
        assert inst.guest.read(100, 8) == struct.pack("<II", 1, len("gene-x") + 1)
        assert inst.call("call_args_get", 200, 300) == 0
        assert inst.guest.read(200, 4) == struct.pack("<I", 300)
        assert inst.guest.read(300, 7) == b"gene-x\x00"
        assert inst.call("call_environ_sizes_get", 100, 104) == 0
        assert inst.guest.read(100, 8) == bytes(8)
        assert inst.call("call_fd_fdstat_get", 1, 400) == 0
        assert inst.guest.read(400, 1) == b"\x02"
        assert inst.call("call_fd_prestat_get", 3, 400) == 8       # no preopened dir
        assert inst.call("call_path_open", 3, 0, 500, 5, 0, 0, 0, 0, 600) == 8
        assert inst.call("call_sock_accept", 3, 0, 600) == 8
        assert inst.call("call_fd_seek", 0, 0, 0, 600) == 70        # ESPIPE
        assert inst.call("call_poll_oneoff", 0, 0, 1, 600) == 58    # ENOTSUP
        assert inst.call("call_clock_time_get", 0, 1, 700) == 0
        assert struct.unpack("<Q", inst.guest.read(700, 8))[0] > 1_600_000_000 * 10**9
        assert inst.call("call_clock_time_get", 9, 1, 700) == 28    # EINVAL
        assert inst.call("call_random_get", 800, 16) == 0
        assert inst.call("call_random_get", 65530, 16) == 28        # past the end
        assert inst.call("call_fd_read", 0, 0, 0, 900) == 0        # empty stdin, no iovecs


i32s = st.one_of(st.integers(-(2**31), 2**31 - 1),
                 st.sampled_from([0, 1, 2, 3, -1, 65532, 65536, 2**31 - 1, -(2**31)]))
i64s = st.integers(-(2**63), 2**63 - 1)
CALLABLE = sorted(name for name in WASI_SIGNATURES if name != "proc_exit")


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_wasi_functions_with_any_arguments_return_an_errno(data: st.DataObject) -> None:
    instance = _shared_forwarder()
    name = data.draw(st.sampled_from(CALLABLE))
    params = WASI_SIGNATURES[name][0]
    args = [data.draw(i64s if kind == "I" else i32s) for kind in params]
    result = instance.call(f"call_{name}", *args)
    assert isinstance(result, int) and 0 <= result <= 76, (name, args, result)
    assert instance.call("call_sched_yield") == 0  # still usable


_forwarder_instance: list[GeneInstance] = []


def _shared_forwarder() -> GeneInstance:
    if not _forwarder_instance:
        module = wasmtime.Module(_engine(), wasmtime.wat2wasm(_forwarder()))
        inst = GeneInstance(module, DeniedMemory(), Limits(deadline_s=3600.0, fuel=10**15),
                            name="fuzz", stdin=b'{"some":"input"}' * 100)
        _forwarder_instance.append(inst)
    return _forwarder_instance[0]


EXIT_SCRIPT = """
import sys
from rotifer.genes.wasm import run_wasm_code
from rotifer.memory import DeniedMemory
print(run_wasm_code(bytes.fromhex(sys.argv[1]), "gene.wasm", {"a": 1}, DeniedMemory(),
                    name="g"))
"""


def test_a_process_that_ran_a_wasi_gene_exits_cleanly() -> None:
    """wasmtime's own WASI called back into Python from tokio threads while
    the interpreter shut down, and the process aborted (about one exit in
    six); the host's WASI runs on the gene's thread only."""
    code = command(WRITE_DATA, '{"ok":1}').hex()
    for _ in range(8):
        done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, code], capture_output=True,
                              text=True, timeout=120, check=False)
        assert (done.returncode, done.stdout, done.stderr) == (0, "{'ok': 1}\n", "")
