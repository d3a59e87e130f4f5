"""The memory host functions' callback and budget, straight from wasmtime's C API.

wasmtime-py's ``Linker.define_func`` runs every host call through one generic
Python trampoline: it wraps the caller (an FFI call), boxes each parameter in
a ``Val`` and converts the result back, comparing value types through more
FFI calls -- about as much time as the store's own ``read_memory``
(docs/benchmarks.md, "WASM").  The four memory functions all have the type
``(i32, i32, i32, i32) -> i32``, so the host defines them with the C API's
``wasmtime_linker_define_func_unchecked`` instead: wasmtime hands the callback
the raw argument slots, the callback reads four u32 and writes its i32 result
into the first slot with ctypes, a fraction of that.

Each memory call also reads and sets the store's fuel and reads the memory's
size; :class:`Fuel` and :class:`MemorySize` do that through C prototypes that
take plain addresses.

This reaches private parts of wasmtime-py: its loaded library
(``wasmtime._ffi.dll``), a store's context and a memory's handle, and the slot
through which a Python exception in a host function travels back to the
caller (``wasmtime._func.LAST_EXCEPTION``, used only for a BaseException such
as KeyboardInterrupt: the host functions turn every Exception into a result
code themselves).  :func:`available` checks the pieces once; where one is
missing (another wasmtime-py), the host uses ``define_func`` and the public
methods as before -- the same behaviour, only slower.  The tests run the host
functions both ways.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import logging
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import wasmtime

from .engine import wasmtime_version

#: A memory host function as this module calls it: ``(caller, req_ptr,
#: req_len, out_ptr, out_cap) -> result``, the four as u32 (wasm32 pointers
#: and lengths are unsigned); ``caller`` is the address of wasmtime's caller,
#: for :func:`caller_export`.
Handler = Callable[[int, int, int, int, int], int]

#: ``wasmtime_func_unchecked_callback_t``: (env, caller, args_and_results,
#: len) -> trap.  Addresses as plain ints: ctypes builds no pointer objects.
_CALLBACK: Final = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_size_t)
_FINALIZER: Final = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
#: Four i32 arguments, each in a 16-byte ``wasmtime_val_raw_t`` (i32 in its low,
#: little-endian bytes); read as u32 at indexes 0, 4, 8 and 12.
_SLOT_WORDS: Final = 4
_ARGS: Final = ctypes.c_uint32 * (3 * _SLOT_WORDS + 1)
_U32: Final = 0xFFFF_FFFF

#: The handlers of the defined functions by the ``env`` wasmtime passes back;
#: an entry is dropped when wasmtime drops the function (the finalizer), as
#: wasmtime-py does for its own.  Handles count from 1 (env 0 reads as None).
_HANDLERS: dict[int, Handler] = {}
_NEXT: Final = itertools.count(1)


def _trap(exc: BaseException) -> int:
    """Hand ``exc`` back the way wasmtime-py's own trampoline does: a trap now,
    and the exception raised again where Python called into the guest."""
    from wasmtime import _func

    _func.LAST_EXCEPTION = exc  # type: ignore[assignment]  # as its own trampoline does
    trap = wasmtime.Trap("python exception")._consume()
    return int(ctypes.cast(trap, ctypes.c_void_p).value or 0)


def _trampoline(env: int | None, caller: int, args: int, _len: int) -> int:
    try:
        slots = _ARGS.from_address(args)
        slots[0] = _HANDLERS[env or 0](caller, slots[0], slots[4], slots[8], slots[12]) & _U32
        return 0
    except BaseException as exc:  # a handler returns codes; this is ^C and the like
        return _trap(exc)


def _finalize(env: int | None, _drop: Callable[[int, None], object] = _HANDLERS.pop) -> None:
    # ``_drop`` is bound now: at interpreter exit wasmtime may drop the last
    # store after this module's globals are gone.
    _drop(env or 0, None)


#: The C function pointers, one of each for all the defined functions (each handler
#: is found by ``env``), alive as long as the module.
_TRAMPOLINE: Final = _CALLBACK(_trampoline)
_FINALIZE: Final = _FINALIZER(_finalize)


#: The wasmtime-py major versions whose C signatures this module was checked
#: against.  A ctypes prototype that no longer matches the library does not
#: raise, it corrupts memory; so any other version uses ``define_func``.
TESTED_MAJORS: Final = frozenset({50})


_log = logging.getLogger(__name__)


def _tested_version() -> bool:
    version = wasmtime_version()
    major = version.split(".")[0]
    if major.isdigit() and int(major) in TESTED_MAJORS:
        return True
    # Said once per process (the caller is cached): the host still works, only slower.
    _log.warning("wasmtime-py %s is not a version rotifer's fast host-call path was "
                 "checked against (majors %s); memory host calls use define_func instead",
                 version, ", ".join(str(m) for m in sorted(TESTED_MAJORS)))
    return False


@functools.cache
def _define_unchecked() -> Any:
    """``wasmtime_linker_define_func_unchecked`` with addresses as plain ints,
    or None if this wasmtime-py is not one this module was checked against or
    does not offer all that this module needs."""
    if not _tested_version():
        return None
    try:
        from wasmtime import _ffi, _func

        if ctypes.sizeof(_ffi.wasmtime_val_raw_t) != 4 * _SLOT_WORDS:
            return None
        if not hasattr(_func, "LAST_EXCEPTION") or not hasattr(wasmtime.Trap, "_consume"):
            return None
        p, n = ctypes.c_void_p, ctypes.c_size_t
        prototype = ctypes.CFUNCTYPE(p, p, ctypes.c_char_p, n, ctypes.c_char_p, n, p, p, p, p)
        return prototype(("wasmtime_linker_define_func_unchecked", _ffi.dll))
    except (ImportError, AttributeError):
        return None


def available() -> bool:
    return _define_unchecked() is not None


def define(linker: wasmtime.Linker, module: str, name: str, ty: wasmtime.FuncType,
           handler: Handler) -> bool:
    """Define ``module.name`` (of type ``ty``: four i32 in, one i32 out) to call
    ``handler``; False, with nothing defined, if this wasmtime-py cannot."""
    define_unchecked = _define_unchecked()
    if define_unchecked is None:
        return False
    env = next(_NEXT)
    _HANDLERS[env] = handler
    module_bytes, name_bytes = module.encode(), name.encode()
    void = ctypes.c_void_p
    error = define_unchecked(ctypes.cast(linker.ptr(), void), module_bytes, len(module_bytes),
                             name_bytes, len(name_bytes), ctypes.cast(ty.ptr(), void),
                             ctypes.cast(_TRAMPOLINE, void), env, ctypes.cast(_FINALIZE, void))
    if error:
        _HANDLERS.pop(env, None)
        _raise(error)
    return True


def _raise(error: int) -> None:
    """Raise (and free) the ``wasmtime_error_t`` at ``error``."""
    from wasmtime import _ffi

    raise wasmtime.WasmtimeError._from_ptr(
        ctypes.cast(error, ctypes.POINTER(_ffi.wasmtime_error_t)))


def caller_export(caller: int, name: str) -> object:
    """The calling instance's export ``name`` (None if it has none), for a
    handler that has only the caller's address."""
    from wasmtime import _ffi

    return wasmtime.Caller(ctypes.cast(caller, ctypes.POINTER(_ffi.wasmtime_caller_t))).get(name)


# -- fuel and memory size -----------------------------------------------------------
#
# Every memory call reads the store's fuel, sets it and reads the memory's
# size: three FFI calls.  Through wasmtime-py's methods each builds ctypes
# pointer objects and checks their types; these prototypes take plain
# addresses, and cost less than half as much.


class _Prototypes(NamedTuple):
    """The C functions :class:`Fuel` and :class:`MemorySize` call, taking addresses."""

    get_fuel: Any
    set_fuel: Any
    memory_data_size: Any


@functools.cache
def _prototypes() -> _Prototypes | None:
    """The prototypes, or None where :func:`define` is not available either."""
    if _define_unchecked() is None:
        return None
    from wasmtime import _ffi

    p = ctypes.c_void_p
    try:
        if not hasattr(wasmtime.Store, "_context"):
            return None
        return _Prototypes(
            get_fuel=ctypes.CFUNCTYPE(p, p, p)(("wasmtime_context_get_fuel", _ffi.dll)),
            set_fuel=ctypes.CFUNCTYPE(p, p, ctypes.c_uint64)(
                ("wasmtime_context_set_fuel", _ffi.dll)),
            memory_data_size=ctypes.CFUNCTYPE(ctypes.c_size_t, p, p)(
                ("wasmtime_memory_data_size", _ffi.dll)))
    except AttributeError:  # a symbol this library does not export
        return None


def _context(store: wasmtime.Store) -> int:
    """The address of the store's ``wasmtime_context_t``."""
    return int(ctypes.cast(store._context(), ctypes.c_void_p).value or 0)


class Fuel:
    """A store's fuel: ``get()`` and ``set(fuel)``, as ``store.get_fuel`` and
    ``store.set_fuel`` (the same errors), through the prototypes where they are
    available."""

    __slots__ = ("_context", "_get", "_left", "_put", "_store", "_where")
    _get: Any
    _put: Any

    def __init__(self, store: wasmtime.Store) -> None:
        self._store = store  # keeps the context alive
        prototypes = _define_unchecked() and _prototypes()
        self._get = prototypes.get_fuel if prototypes else None
        self._put = prototypes.set_fuel if prototypes else None
        self._context = _context(store) if prototypes else 0
        self._left = ctypes.c_uint64(0)
        self._where = ctypes.addressof(self._left)

    def get(self) -> int:
        if self._get is None:
            return int(self._store.get_fuel())
        error = self._get(self._context, self._where)
        if error:
            _raise(error)
        return int(self._left.value)

    def set(self, fuel: int) -> None:
        if self._put is None:
            self._store.set_fuel(fuel)
            return
        error = self._put(self._context, fuel)
        if error:
            _raise(error)


class MemorySize:
    """``memory.data_len(store)`` as ``size()``, through the prototype where it
    is available."""

    __slots__ = ("_context", "_handle", "_size", "memory", "store")
    _size: Any

    def __init__(self, memory: wasmtime.Memory, store: wasmtime.Store) -> None:
        self.memory, self.store = memory, store  # keep the handle and the context alive
        prototypes = _define_unchecked() and _prototypes()
        handle = getattr(memory, "_memory", None)  # its wasmtime_memory_t
        if not prototypes or not isinstance(handle, ctypes.Structure):
            prototypes = handle = None
        self._size = prototypes.memory_data_size if prototypes else None
        self._context = _context(store) if prototypes else 0
        self._handle = ctypes.addressof(handle) if handle is not None else 0

    def size(self) -> int:
        if self._size is None:
            return int(self.memory.data_len(self.store))
        return int(self._size(self._context, self._handle))
