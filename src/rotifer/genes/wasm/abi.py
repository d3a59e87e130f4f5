"""The WASM ABI between rotifer and a gene that brings its own WASM.

Everything both sides must agree on lives here, so the host functions, the
runtime and ``rotifer compile`` check a module against one definition:

* imports from module ``rotifer``: ``readMemory``, ``writeMemory``,
  ``queryMemory``, ``deleteMemory`` as ``(req_ptr, req_len, out_ptr, out_cap)
  -> i32`` and ``log(level, ptr, len)``; a gene may import any subset, and
  also AssemblyScript's ``env.abort/trace/seed`` and WASI preview 1
  (``imports.py``);
* exports: ``memory``, ``express(ptr: i32, len: i32) -> i32`` and optionally
  ``alloc(len: i32) -> i32`` and ``_initialize()`` -- or, for a WASI command
  gene, ``memory`` and ``_start()`` (input on stdin, output on stdout);
* the host functions' result codes (the seed's table).
"""

from __future__ import annotations

from typing import Final, Literal

import wasmtime
from wasmtime import FuncType, ValType

from rotifer.memory import ErrorCode

from .imports import ENV_MODULE, WASI_MODULE, env_type, fix_for, wasi_type

IMPORT_MODULE: Final = "rotifer"
MEMORY_FUNCTIONS: Final = ("readMemory", "writeMemory", "queryMemory", "deleteMemory")
LOG_FUNCTION: Final = "log"

EXPORT_MEMORY: Final = "memory"
EXPORT_EXPRESS: Final = "express"
EXPORT_ALLOC: Final = "alloc"
#: A WASI command's entry point; a module with ``_start`` and no ``express``
#: is a command gene.
EXPORT_START: Final = "_start"
#: A WASI reactor's initializer (Rust ``wasm32-wasi`` libraries, C with
#: wasi-libc); called once after instantiation when exported.
EXPORT_INITIALIZE: Final = "_initialize"

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


def _expected_import(module: str, name: str) -> FuncType | None:
    """The type the host gives ``module.name``; None if it does not provide it."""
    if module == IMPORT_MODULE:
        if name in MEMORY_FUNCTIONS:
            return memory_call_type()
        if name == LOG_FUNCTION:
            return log_type()
        return None
    if module == ENV_MODULE:
        return env_type(name)
    if module == WASI_MODULE:
        return wasi_type(name)
    return None


class AbiViolation(Exception):
    """The module does not follow the ABI; the message says how."""


#: What a module is to the runtime: ``express`` (called with a pointer to the
#: input, may use the memory calls) or ``command`` (a WASI command: ``_start``,
#: input on stdin, output on stdout).
GeneShape = Literal["express", "command"]


def check_module(module: wasmtime.Module) -> GeneShape:
    """Refuse a module the host cannot run before anything is instantiated;
    return its shape.

    Checking up front turns a vague link error ("unknown import") into a
    message a gene author can act on, and lets ``rotifer compile`` refuse the
    module instead of every later run failing.
    """
    exports = {exp.name: exp.type for exp in module.exports}
    i32 = str(ValType.i32())
    express = exports.get(EXPORT_EXPRESS)
    start = exports.get(EXPORT_START)
    command = express is None and start is not None
    provided = f"{', '.join(MEMORY_FUNCTIONS)} and {LOG_FUNCTION}"
    for imp in module.imports:
        where = f"{imp.module}.{imp.name}"
        ty = imp.type
        expected = _expected_import(imp.module, imp.name or "")
        if expected is None:
            raise AbiViolation(fix_for(imp.module, imp.name or "", provided=provided))
        if not isinstance(ty, FuncType) or _signature(ty) != _signature(expected):
            raise AbiViolation(f"the module imports {where} with the wrong type {ty}")
        if command and imp.module == IMPORT_MODULE and imp.name in MEMORY_FUNCTIONS:
            raise AbiViolation(
                f"the module imports {where}, but it is a WASI command gene (it exports "
                f"{EXPORT_START} and no {EXPORT_EXPRESS}), which gets no memory host "
                f"functions; export {EXPORT_EXPRESS}(ptr, len) to use memory")
    if not isinstance(exports.get(EXPORT_MEMORY), wasmtime.MemoryType):
        raise AbiViolation("the module must export its linear memory as 'memory'")
    if command:
        if not isinstance(start, FuncType) or _signature(start) != ((), ()):
            raise AbiViolation(f"an exported {EXPORT_START} must take and return nothing")
        return "command"
    if not isinstance(express, FuncType) or _signature(express) != ((i32, i32), (i32,)):
        raise AbiViolation(
            f"the module must export {EXPORT_EXPRESS}(ptr: i32, len: i32) -> i32, or be a "
            f"WASI command that exports {EXPORT_START}() and no {EXPORT_EXPRESS}")
    alloc = exports.get(EXPORT_ALLOC)
    if alloc is not None and (
        not isinstance(alloc, FuncType) or _signature(alloc) != ((i32,), (i32,))
    ):
        raise AbiViolation("an exported alloc must be alloc(len: i32) -> i32")
    initialize = exports.get(EXPORT_INITIALIZE)
    if initialize is not None and (
        not isinstance(initialize, FuncType) or _signature(initialize) != ((), ())
    ):
        raise AbiViolation(f"an exported {EXPORT_INITIALIZE} must take and return nothing")
    return "express"
