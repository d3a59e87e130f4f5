"""The WASM ABI between rotifer and a gene that brings its own WASM.

Everything both sides must agree on lives here, so the host functions, the
runtime and ``rotifer compile`` check a module against one definition:

* imports, all from module ``rotifer``: ``readMemory``, ``writeMemory``,
  ``queryMemory``, ``deleteMemory`` as ``(req_ptr, req_len, out_ptr, out_cap)
  -> i32`` and ``log(level, ptr, len)``; a gene may import any subset;
* exports: ``memory``, ``express(ptr: i32, len: i32) -> i32`` and optionally
  ``alloc(len: i32) -> i32``;
* the host functions' result codes (the seed's table).
"""

from __future__ import annotations

from typing import Final

import wasmtime
from wasmtime import FuncType, ValType

from rotifer.memory import ErrorCode

IMPORT_MODULE: Final = "rotifer"
MEMORY_FUNCTIONS: Final = ("readMemory", "writeMemory", "queryMemory", "deleteMemory")
LOG_FUNCTION: Final = "log"

EXPORT_MEMORY: Final = "memory"
EXPORT_EXPRESS: Final = "express"
EXPORT_ALLOC: Final = "alloc"

#: ``out`` is too small for the response.
OUT_TOO_SMALL: Final = -1
#: The run's deadline, its fuel or its host-call budget is used up.
BUDGET_SPENT: Final = -4

#: A refused memory call's result, by the seed's error code.
RESULT_OF_CODE: Final[dict[ErrorCode, int]] = {
    ErrorCode.ACCESS_DENIED: -2,
    ErrorCode.QUOTA_EXCEEDED: -8,
    ErrorCode.INVALID_INPUT: -10,
    ErrorCode.NOT_FOUND: -12,
    ErrorCode.STORAGE_ERROR: -13,
}

#: What a negative result means, for messages (a gene returning one of these
#: from ``express`` usually passed a host call's result on).
MEANING_OF_RESULT: Final[dict[int, str]] = {
    OUT_TOO_SMALL: "out is too small for the response",
    BUDGET_SPENT: "the run's deadline or the call's budget is used up",
    **{result: code.value for code, result in RESULT_OF_CODE.items()},
}

#: The largest address space a wasm32 pointer can name.
U32_MASK: Final = 0xFFFF_FFFF


def memory_call_type() -> FuncType:
    i32 = ValType.i32()
    return FuncType([i32, i32, i32, i32], [i32])


def log_type() -> FuncType:
    i32 = ValType.i32()
    return FuncType([i32, i32, i32], [])


def _signature(ty: FuncType) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(str(p) for p in ty.params), tuple(str(r) for r in ty.results)


def _expected_import(name: str) -> FuncType | None:
    if name in MEMORY_FUNCTIONS:
        return memory_call_type()
    if name == LOG_FUNCTION:
        return log_type()
    return None


class AbiViolation(Exception):
    """The module does not follow the ABI; the message says how."""


def check_module(module: wasmtime.Module) -> None:
    """Refuse a module the host cannot run before anything is instantiated.

    Checking up front turns a vague link error ("unknown import") into a
    message a gene author can act on, and lets ``rotifer compile`` refuse the
    module instead of every later run failing.
    """
    for imp in module.imports:
        where = f"{imp.module}.{imp.name}"
        ty = imp.type
        expected = _expected_import(imp.name or "") if imp.module == IMPORT_MODULE else None
        if expected is None:
            raise AbiViolation(
                f"the module imports {where}, which the host does not provide; it may import "
                f"only {', '.join(MEMORY_FUNCTIONS)} and {LOG_FUNCTION} from {IMPORT_MODULE!r}"
            )
        if not isinstance(ty, FuncType) or _signature(ty) != _signature(expected):
            raise AbiViolation(f"the module imports {where} with the wrong type {ty}")
    exports = {exp.name: exp.type for exp in module.exports}
    if not isinstance(exports.get(EXPORT_MEMORY), wasmtime.MemoryType):
        raise AbiViolation("the module must export its linear memory as 'memory'")
    express = exports.get(EXPORT_EXPRESS)
    i32 = str(ValType.i32())
    if not isinstance(express, FuncType) or _signature(express) != ((i32, i32), (i32,)):
        raise AbiViolation("the module must export express(ptr: i32, len: i32) -> i32")
    alloc = exports.get(EXPORT_ALLOC)
    if alloc is not None and (
        not isinstance(alloc, FuncType) or _signature(alloc) != ((i32,), (i32,))
    ):
        raise AbiViolation("an exported alloc must be alloc(len: i32) -> i32")
