"""WASI preview 1 as the host links it, against hand-written modules (no
toolchain needed): command genes that write, exit, flood stdout or sleep,
express genes that import WASI, and every import the host refuses, with the
fix the refusal names."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from rotifer.genes.errors import CompileFailed, GeneFailed
from rotifer.genes.wasm import GeneInstance, Limits, run_wasm_code
from rotifer.genes.wasm.compile import check_wasm
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
    limits = Limits(deadline_s=1.0, fuel=10**15, max_output_bytes=4096)
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


def test_no_room_for_the_stdin_file_is_a_clean_failure(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(GeneFailed, match=r"^GENE_FAILED: cannot give w its WASI input: "):
        run(command(WRITE_DATA, "{}"), {"x": 1})
