"""AssemblyScript's ``env.abort``, ``env.trace`` and ``env.seed`` against
hand-written modules that pass any pointers and lengths they like (no
toolchain needed): whatever the gene claims, the run fails with one bounded
line, and the host never crashes or reads outside the gene's memory."""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import pytest
import wasmtime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rotifer.genes.errors import GeneFailed
from rotifer.genes.wasm import GeneInstance, Limits
from rotifer.genes.wasm.assemblyscript import MAX_STRING_BYTES, read_as_string
from rotifer.genes.wasm.guest import CallView
from rotifer.memory import DeniedMemory

PAGE = 65536

#: abort(msg, file, line, col) and trace(msg, n, ...) straight from exports;
#: poke() lays out strings.  AssemblyScript follows abort with unreachable.
ABORTER = """
(module
  (import "env" "abort" (func $abort (param i32 i32 i32 i32)))
  (import "env" "trace" (func $trace (param i32 i32 f64 f64 f64 f64 f64)))
  (import "env" "seed" (func $seed (result f64)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{}\\00")
  (func (export "express") (param i32 i32) (result i32) (i32.const 16))
  (func (export "poke") (param i32 i32) (i32.store (local.get 0) (local.get 1)))
  (func (export "poke8") (param i32 i32) (i32.store8 (local.get 0) (local.get 1)))
  (func (export "call_abort") (param i32 i32 i32 i32)
    (call $abort (local.get 0) (local.get 1) (local.get 2) (local.get 3))
    (unreachable))
  (func (export "abort_and_return") (param i32)
    (call $abort (local.get 0) (i32.const 0) (i32.const 1) (i32.const 2)))
  (func (export "call_trace") (param i32 i32)
    (call $trace (local.get 0) (local.get 1) (f64.const 1) (f64.const 2.5) (f64.const -3)
                 (f64.const 4) (f64.const 5)))
  (func (export "seed") (result f64) (call $seed))
)
"""

LIMITS = Limits(deadline_s=30.0)


@pytest.fixture(scope="module")
def aborter() -> wasmtime.Module:
    from rotifer.genes.wasm.engine import get_engine

    return wasmtime.Module(get_engine(), wasmtime.wat2wasm(ABORTER))


def put_string(inst: GeneInstance, ptr: int, text: str, *, claimed: int | None = None) -> None:
    """An AssemblyScript string at ptr: UTF-16LE, byte length in the u32 before it."""
    data = text.encode("utf-16-le")
    assert inst.guest is not None
    inst.guest.write(ptr - 4, struct.pack("<I", len(data) if claimed is None else claimed))
    inst.guest.write(ptr, data)


def aborted(module: wasmtime.Module, *args: int, prepare: Any = None,
            logs: list[tuple[int, str]] | None = None) -> str:
    sink = None if logs is None else (lambda level, line: logs.append((level, line)))
    with GeneInstance(module, DeniedMemory(), LIMITS, name="g", log_sink=sink) as inst:
        if prepare is not None:
            prepare(inst)
        with pytest.raises(GeneFailed) as caught:
            inst.call("call_abort", *args)
    return caught.value.message


def test_abort_gives_message_file_line_and_column(aborter: wasmtime.Module) -> None:
    def prepare(inst: GeneInstance) -> None:
        put_string(inst, 1024, "index out of range ✓ 𝄞")
        put_string(inst, 2048, "assembly/index.ts")

    assert aborted(aborter, 1024, 2048, 12, 7, prepare=prepare) == (
        "g aborted: index out of range ✓ 𝄞 at assembly/index.ts:12:7")


def test_abort_with_null_strings(aborter: wasmtime.Module) -> None:
    assert aborted(aborter, 0, 0, 0, 0) == "g aborted: (no message) at ?:0:0"


@pytest.mark.parametrize("ptr", [1, 2, 3, PAGE, PAGE + 4, 0xFFFF_FFFC, -4, -1])
def test_abort_with_a_pointer_outside_memory(aborter: wasmtime.Module, ptr: int) -> None:
    assert aborted(aborter, ptr, ptr, 1, 2) == "g aborted: (no message) at ?:1:2"


def test_a_lying_length_is_cut_at_the_end_of_memory_and_at_the_cap(
        aborter: wasmtime.Module) -> None:
    def at_end(inst: GeneInstance) -> None:
        put_string(inst, PAGE - 6, "abc", claimed=0xFFFF_FFFF)

    assert aborted(aborter, PAGE - 6, 0, 1, 1, prepare=at_end) == "g aborted: abc … at ?:1:1"

    def long(inst: GeneInstance) -> None:
        put_string(inst, 1024, "y" * 5000)

    message = aborted(aborter, 1024, 0, 1, 1, prepare=long)
    assert message == "g aborted: " + "y" * (MAX_STRING_BYTES // 2) + " … at ?:1:1"


def test_an_abort_message_stays_on_one_line(aborter: wasmtime.Module) -> None:
    def prepare(inst: GeneInstance) -> None:
        put_string(inst, 1024, "two\nlines\r\x00\x1b[31m")

    assert aborted(aborter, 1024, 0, 1, 1, prepare=prepare) == (
        "g aborted: two lines   [31m at ?:1:1")


def test_bad_utf16_is_replaced(aborter: wasmtime.Module) -> None:
    def prepare(inst: GeneInstance) -> None:
        assert inst.guest is not None
        inst.guest.write(1020, struct.pack("<I", 5) + b"\x00\xd8a\x00b")  # lone surrogate, odd

    assert aborted(aborter, 1024, 0, 1, 1, prepare=prepare) == "g aborted: \ufffda at ?:1:1"


def test_a_gene_that_carries_on_after_abort_still_fails(aborter: wasmtime.Module) -> None:
    with GeneInstance(aborter, DeniedMemory(), LIMITS, name="g") as inst:
        put_string(inst, 1024, "first")
        with pytest.raises(GeneFailed, match=r"^GENE_FAILED: g aborted: first at \?:1:2$"):
            inst.call("abort_and_return", 1024)


u32 = st.integers(0, 0xFFFF_FFFF)
anywhere = st.one_of(u32, st.integers(0, PAGE + 8), st.sampled_from([0, 4, PAGE - 4, PAGE]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(msg=anywhere, file=anywhere, line=u32, col=u32,
       pokes=st.lists(st.tuples(st.integers(0, PAGE - 4), u32), max_size=8),
       fill=st.binary(max_size=64))
def test_abort_never_crashes_and_stays_bounded(aborter: wasmtime.Module, msg: int, file: int,
                                               line: int, col: int,
                                               pokes: list[tuple[int, int]],
                                               fill: bytes) -> None:
    def prepare(inst: GeneInstance) -> None:
        assert inst.guest is not None
        for at, value in pokes:
            inst.guest.write(at, struct.pack("<I", value))
        if msg + len(fill) <= PAGE:
            inst.guest.write(msg, fill)

    message = aborted(aborter, msg, file, line, col, prepare=prepare)
    assert message.startswith("g aborted: ")
    assert message.endswith(f":{line}:{col}")
    assert "\n" not in message and "\r" not in message
    assert len(message) < 2 * (MAX_STRING_BYTES // 2 + 2) + 100


@given(memory=st.binary(max_size=256), ptr=st.integers(0, 300))
def test_read_as_string_reads_only_inside_the_memory(memory: bytes, ptr: int) -> None:
    buffer = ctypes.create_string_buffer(memory, len(memory))
    view = CallView(len(memory), ctypes.addressof(buffer) if memory else 0)
    text = read_as_string(view, ptr)
    if ptr < 4 or ptr > len(memory):
        assert text is None
    else:
        assert text is not None
        (claimed,) = struct.unpack("<I", memory[ptr - 4:ptr])
        body = text.removesuffix(" …")
        assert len(body) <= max(0, min(claimed, len(memory) - ptr)) // 2 + 1


def test_trace_goes_to_the_log_with_its_numbers(aborter: wasmtime.Module) -> None:
    logs: list[tuple[int, str]] = []
    with GeneInstance(aborter, DeniedMemory(), LIMITS, name="g",
                      log_sink=lambda level, line: logs.append((level, line))) as inst:
        put_string(inst, 1024, "point")
        inst.call("call_trace", 1024, 3)
        inst.call("call_trace", 0, 0)
        inst.call("call_trace", 0xFFFF_FFF0, 99)  # bad pointer, too many numbers
        inst.call("call_trace", 1024, -1)
    assert logs == [(1, "trace: point 1, 2.5, -3"), (1, "trace: "),
                    (1, "trace:  1, 2.5, -3, 4, 5"), (1, "trace: point 1, 2.5, -3, 4, 5")]


def test_seed_is_a_non_zero_number(aborter: wasmtime.Module) -> None:
    with GeneInstance(aborter, DeniedMemory(), LIMITS, name="g") as inst:
        seeds = {inst.call("seed") for _ in range(5)}
    assert all(isinstance(s, float) and s != 0 for s in seeds) and len(seeds) > 1
