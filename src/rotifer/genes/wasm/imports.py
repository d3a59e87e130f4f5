"""Which imports the host provides beyond ``rotifer``, and what to do about the rest.

Real toolchains import more than the four memory calls and ``log``:

* AssemblyScript imports ``env.abort`` in every module (and ``env.trace``,
  ``env.seed`` when a gene uses ``trace()`` or ``Math.random``);
* Rust ``wasm32-wasi`` and C with wasi-libc import ``wasi_snapshot_preview1``
  (WASI preview 1), which the host implements itself with stdin, stdout and
  stderr and nothing else (see ``wasi.py``).

A module that imports anything else is refused before it is instantiated,
and the message names the import and, where the usual cause is known, the
build option that removes it -- a gene author should not have to guess why
``clang -O2`` made a module the host will not load.
"""

from __future__ import annotations

from typing import Final

from wasmtime import FuncType, ValType

ENV_MODULE: Final = "env"
WASI_MODULE: Final = "wasi_snapshot_preview1"

#: Every function of WASI preview 1 (``wasi_snapshot_preview1``) with its
#: core wasm type: parameters and results, ``i`` for i32 and ``I`` for i64.
#: ``wasi.py`` implements them; a test links a module importing all of them
#: against wasmtime's own WASI, so the types are the standard's.
WASI_SIGNATURES: Final[dict[str, tuple[str, str]]] = {
    "args_get": ("ii", "i"), "args_sizes_get": ("ii", "i"),
    "environ_get": ("ii", "i"), "environ_sizes_get": ("ii", "i"),
    "clock_res_get": ("ii", "i"), "clock_time_get": ("iIi", "i"),
    "fd_advise": ("iIIi", "i"), "fd_allocate": ("iII", "i"), "fd_close": ("i", "i"),
    "fd_datasync": ("i", "i"), "fd_fdstat_get": ("ii", "i"),
    "fd_fdstat_set_flags": ("ii", "i"), "fd_fdstat_set_rights": ("iII", "i"),
    "fd_filestat_get": ("ii", "i"), "fd_filestat_set_size": ("iI", "i"),
    "fd_filestat_set_times": ("iIIi", "i"), "fd_pread": ("iiiIi", "i"),
    "fd_prestat_get": ("ii", "i"), "fd_prestat_dir_name": ("iii", "i"),
    "fd_pwrite": ("iiiIi", "i"), "fd_read": ("iiii", "i"), "fd_readdir": ("iiiIi", "i"),
    "fd_renumber": ("ii", "i"), "fd_seek": ("iIii", "i"), "fd_sync": ("i", "i"),
    "fd_tell": ("ii", "i"), "fd_write": ("iiii", "i"),
    "path_create_directory": ("iii", "i"), "path_filestat_get": ("iiiii", "i"),
    "path_filestat_set_times": ("iiiiIIi", "i"), "path_link": ("iiiiiii", "i"),
    "path_open": ("iiiiiIIii", "i"), "path_readlink": ("iiiiii", "i"),
    "path_remove_directory": ("iii", "i"), "path_rename": ("iiiiii", "i"),
    "path_symlink": ("iiiii", "i"), "path_unlink_file": ("iii", "i"),
    "poll_oneoff": ("iiii", "i"), "proc_exit": ("i", ""), "proc_raise": ("i", "i"),
    "sched_yield": ("", "i"), "random_get": ("ii", "i"), "sock_accept": ("iii", "i"),
    "sock_recv": ("iiiiii", "i"), "sock_send": ("iiiii", "i"), "sock_shutdown": ("ii", "i"),
}


def wasi_type(name: str) -> FuncType | None:
    """The type of a WASI preview 1 function, or None if there is none of that name."""
    signature = WASI_SIGNATURES.get(name)
    if signature is None:
        return None
    params, results = signature
    kinds = {"i": ValType.i32(), "I": ValType.i64()}
    return FuncType([kinds[c] for c in params], [kinds[c] for c in results])


#: libc functions clang calls for memory.fill/memory.copy patterns when the
#: module is built without a libc and without bulk memory.
_LIBC_MEMORY: Final = frozenset({"memset", "memcpy", "memmove", "memcmp", "bcmp"})


def abort_type() -> FuncType:
    """AssemblyScript's ``abort(message, fileName, line, column)``."""
    i32 = ValType.i32()
    return FuncType([i32, i32, i32, i32], [])


def trace_type() -> FuncType:
    """AssemblyScript's ``trace(message, n, a0, a1, a2, a3, a4)``."""
    i32, f64 = ValType.i32(), ValType.f64()
    return FuncType([i32, i32, f64, f64, f64, f64, f64], [])


def seed_type() -> FuncType:
    """AssemblyScript's ``seed() -> f64`` (seeds ``Math.random``)."""
    return FuncType([], [ValType.f64()])


def env_type(name: str) -> FuncType | None:
    """The type of an ``env`` import the host provides, or None."""
    return {"abort": abort_type, "trace": trace_type, "seed": seed_type}.get(name, lambda: None)()


def fix_for(module: str, name: str, *, provided: str) -> str:
    """The refusal for an import the host does not provide: what it is and, if
    known, how to build the gene without it.  ``provided`` lists the rotifer
    functions (for the message about an unknown one)."""
    where = f"{module}.{name}"
    head = f"the module imports {where}, which the host does not provide"
    if module == "rotifer":
        return f"{head}; from 'rotifer' it provides only {provided}"
    if module == ENV_MODULE and name in _LIBC_MEMORY:
        return (f"{head}: clang emitted a call to the C library's {name}; build with "
                "-mbulk-memory (clang turns it into memory.fill/memory.copy), or link a "
                "libc (--target=wasm32-wasi with wasi-libc), or define it in the gene")
    if module == ENV_MODULE:
        return (f"{head}: from 'env' it provides only abort, trace and seed "
                "(AssemblyScript's); for an AssemblyScript standard-library import, replace "
                f"it at build time with asc --use {name}=<your function> or avoid the call; "
                "for C, define the function or link a libc (wasi-libc)")
    if module == WASI_MODULE:
        return (f"{head}: it is not a function of WASI preview 1 "
                f"({WASI_MODULE}); build for wasm32-wasi")
    if module.startswith("wasi_unstable") or module.startswith("wasi:") or (
            module.startswith("wasi_") and module != WASI_MODULE):
        return (f"{head}: the host links only WASI preview 1 ({WASI_MODULE}); build for "
                "wasm32-wasi (preview 1), not another WASI version")
    return (f"{head}; a gene may import the rotifer memory functions, AssemblyScript's "
            f"env.abort/trace/seed and WASI preview 1 ({WASI_MODULE})")


#: The first bytes of a WebAssembly component (WASI preview 2), which is not a
#: core module: magic, then version 0x0d and layer 1.
COMPONENT_HEADER: Final = b"\x00asm\x0d\x00\x01\x00"

COMPONENT_FIX: Final = ("is a WebAssembly component (WASI preview 2), not a core module; "
                        "build for wasm32-wasi (WASI preview 1), e.g. rustc --target "
                        "wasm32-wasi, or clang --target=wasm32-wasi")
