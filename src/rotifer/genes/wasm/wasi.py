"""The minimal WASI (preview 1) a gene gets: stdin, stdout, stderr and little else.

Modules from Rust ``wasm32-wasi`` and C with wasi-libc import
``wasi_snapshot_preview1``, and a WASI command gene (``_start``) talks to the
host only through it.  The host implements every preview 1 function itself:

* ``fd_read`` on 0 reads the input JSON (command genes; empty for express
  genes); ``fd_write`` on 1 and 2 goes to the run's stdout and stderr streams
  (``streams.py``): a command gene's stdout is kept up to
  ``Limits.max_output_bytes`` and every write past it fails (``EFBIG``);
* ``args`` are just the gene's name; the environment is empty; clocks,
  ``random_get`` and ``sched_yield`` work; ``fd_fdstat_get``,
  ``fd_filestat_get``, ``fd_close`` answer for 0-2, ``fd_seek``/``fd_tell``
  there are ``ESPIPE``;
* there are no other descriptors: no preopened directory, so every path and
  socket call, and every call on another descriptor, is ``EBADF``;
* ``poll_oneoff`` (sleeping, waiting on clocks) is ``ENOTSUP``, as are
  ``fd_fdstat_set_flags`` and ``proc_raise``;
* ``proc_exit`` ends the run with its exit code.

Why not wasmtime's own WASI: it does its I/O on a tokio runtime whose worker
threads call back into Python for custom streams -- also while the
interpreter shuts down, which aborts the process -- and its ``poll_oneoff``
blocks the host thread for as long as the gene asks, where neither fuel nor
the epoch deadline can stop it.  Here every function runs on the gene's own
thread, checks every pointer against the memory (``guest.py``), and never
raises into wasmtime (see host.py).

``proc_exit`` must not return.  A host function can only stop the guest by
raising, which wasmtime-py passes through one process-wide slot (parallel
runs would race on it), so ``proc_exit`` is a two-instruction wasm function
instead: it stores the code in a global and executes ``unreachable``; the
runtime reads the global after the trap.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections.abc import Callable
from typing import Any, Final

import wasmtime

from .abi import EXPORT_MEMORY
from .guest import CallView, as_u32, base_address
from .imports import WASI_MODULE, WASI_SIGNATURES, wasi_type
from .streams import OutputStream

logger = logging.getLogger(__name__)

#: How much of the end of stderr a failure message quotes.
STDERR_TAIL: Final = 1024

# WASI errno values (``__WASI_ERRNO_*``).
SUCCESS: Final = 0
EBADF: Final = 8
EFBIG: Final = 22
EINVAL: Final = 28
EIO: Final = 29
ENOTSUP: Final = 58
ESPIPE: Final = 70

_CHARACTER_DEVICE: Final = 2
_RIGHT_FD_READ: Final = 1 << 1
_RIGHT_FD_WRITE: Final = 1 << 6
_RIGHT_POLL: Final = 1 << 27
#: Read more than this per fd_read/fd_write iovec list and the rest waits for
#: the next call (bounds what one call copies).
MAX_IO_BYTES: Final = 1 << 20

_EXIT = bytes(wasmtime.wat2wasm("""
(module
  (global $code (export "code") (mut i32) (i32.const 0))
  (global $exited (export "exited") (mut i32) (i32.const 0))
  (func (export "proc_exit") (param i32)
    (global.set $code (local.get 0))
    (global.set $exited (i32.const 1))
    (unreachable)))
"""))
_exit_module: wasmtime.Module | None = None


def _exit_helper(engine: wasmtime.Engine) -> wasmtime.Module:
    global _exit_module
    if _exit_module is None:  # a race compiles it twice, harmlessly
        _exit_module = wasmtime.Module(engine, _EXIT)
    return _exit_module


class Wasi:
    """The WASI functions of one run: its stdin, its two output streams.

    ``instances_needed`` is how many instances the run's store must allow
    (the gene and the ``proc_exit`` helper).
    """

    instances_needed: Final = 2

    def __init__(self, *, name: str, stdin: bytes, stdout: OutputStream,
                 stderr: OutputStream) -> None:
        self.args = [name.encode()]
        self.stdin = stdin
        self.stdin_pos = 0
        self.streams = {1: stdout, 2: stderr}
        # The proc_exit helper.  Nothing here may hold the store: wasmtime keeps
        # the host functions (and so this object) until the store is dropped.
        self._exit: wasmtime.Instance | None = None

    def define(self, linker: wasmtime.Linker, store: wasmtime.Store) -> None:
        """Define all of ``wasi_snapshot_preview1`` in ``linker`` for ``store``."""
        self._exit = wasmtime.Instance(store, _exit_helper(store.engine), [])
        exit_func = self._exit.exports(store)["proc_exit"]
        assert isinstance(exit_func, wasmtime.Func)
        linker.define(store, WASI_MODULE, "proc_exit", exit_func)
        for name in WASI_SIGNATURES:
            if name == "proc_exit":
                continue
            ty = wasi_type(name)
            assert ty is not None
            impl = getattr(self, name, None)
            if impl is None:
                linker.define_func(WASI_MODULE, name, ty, _refuse(EBADF))
            else:
                linker.define_func(WASI_MODULE, name, ty, _guarded(name, impl),
                                   access_caller=True)

    def exit_code(self, store: wasmtime.Store) -> int | None:
        """The code the gene passed to ``proc_exit``, or None if it did not exit."""
        if self._exit is None:
            return None
        exports = self._exit.exports(store)
        exited, code = exports["exited"], exports["code"]
        assert isinstance(exited, wasmtime.Global) and isinstance(code, wasmtime.Global)
        return int(code.value(store)) if exited.value(store) else None

    # -- arguments and environment --------------------------------------------------------

    def args_sizes_get(self, view: CallView, argc_ptr: int, size_ptr: int) -> int:
        return _put_pair(view, argc_ptr, len(self.args), size_ptr,
                         sum(len(a) + 1 for a in self.args))

    def args_get(self, view: CallView, argv_ptr: int, buf_ptr: int) -> int:
        return _put_strings(view, self.args, argv_ptr, buf_ptr)

    def environ_sizes_get(self, view: CallView, count_ptr: int, size_ptr: int) -> int:
        return _put_pair(view, count_ptr, 0, size_ptr, 0)

    def environ_get(self, view: CallView, environ_ptr: int, buf_ptr: int) -> int:
        return SUCCESS

    # -- clocks, randomness ---------------------------------------------------------------

    def clock_res_get(self, view: CallView, clock: int, res_ptr: int) -> int:
        if clock not in (0, 1, 2, 3):
            return EINVAL
        return _put(view, res_ptr, "<Q", 1000)

    def clock_time_get(self, view: CallView, clock: int, precision: int, time_ptr: int) -> int:
        now = {0: time.time_ns, 1: time.monotonic_ns, 2: time.process_time_ns,
               3: time.thread_time_ns}.get(clock)
        if now is None:
            return EINVAL
        return _put(view, time_ptr, "<Q", now())

    def random_get(self, view: CallView, buf: int, length: int) -> int:
        if not view.fits(buf, length):
            return EINVAL
        view.write(buf, os.urandom(length))
        return SUCCESS

    def sched_yield(self, view: CallView) -> int:
        return SUCCESS

    def poll_oneoff(self, view: CallView, in_ptr: int, out_ptr: int, count: int,
                    events_ptr: int) -> int:
        return ENOTSUP

    def proc_raise(self, view: CallView, signal: int) -> int:
        return ENOTSUP

    # -- the three descriptors ------------------------------------------------------------

    def fd_read(self, view: CallView, fd: int, iovs: int, count: int, nread_ptr: int) -> int:
        if fd != 0:
            return EBADF
        vectors = _iovecs(view, iovs, count)
        if vectors is None:
            return EINVAL
        total = 0
        for ptr, length in vectors:
            chunk = self.stdin[self.stdin_pos:self.stdin_pos + min(length, MAX_IO_BYTES - total)]
            view.write(ptr, chunk)
            self.stdin_pos += len(chunk)
            total += len(chunk)
            if len(chunk) < length or total >= MAX_IO_BYTES:
                break
        return _put(view, nread_ptr, "<I", total)

    def fd_write(self, view: CallView, fd: int, iovs: int, count: int, nwritten_ptr: int
                 ) -> int:
        stream = self.streams.get(fd)
        if stream is None:
            return EBADF
        vectors = _iovecs(view, iovs, count)
        if vectors is None:
            return EINVAL
        parts: list[bytes] = []
        room = MAX_IO_BYTES
        for ptr, length in vectors:
            parts.append(view.read(ptr, min(length, room)))
            room -= len(parts[-1])
            if room <= 0:
                break
        data = b"".join(parts)
        if not stream.write(data):
            return EFBIG
        return _put(view, nwritten_ptr, "<I", len(data))

    def fd_fdstat_get(self, view: CallView, fd: int, stat_ptr: int) -> int:
        if fd not in (0, 1, 2):
            return EBADF
        rights = (_RIGHT_FD_READ if fd == 0 else _RIGHT_FD_WRITE) | _RIGHT_POLL
        return _put(view, stat_ptr, "<BxHxxxxQQ", _CHARACTER_DEVICE, 0, rights, 0)

    def fd_filestat_get(self, view: CallView, fd: int, stat_ptr: int) -> int:
        if fd not in (0, 1, 2):
            return EBADF
        return _put(view, stat_ptr, "<QQBxxxxxxxQQQQQ", 0, 0, _CHARACTER_DEVICE, 1, 0, 0, 0, 0)

    def fd_fdstat_set_flags(self, view: CallView, fd: int, flags: int) -> int:
        return ENOTSUP if fd in (0, 1, 2) else EBADF

    def fd_close(self, view: CallView, fd: int) -> int:
        return SUCCESS if fd in (0, 1, 2) else EBADF

    def fd_seek(self, view: CallView, fd: int, offset: int, whence: int, pos_ptr: int) -> int:
        return ESPIPE if fd in (0, 1, 2) else EBADF

    def fd_tell(self, view: CallView, fd: int, pos_ptr: int) -> int:
        return ESPIPE if fd in (0, 1, 2) else EBADF


def _refuse(errno: int) -> Callable[..., int]:
    """A function that does nothing and returns ``errno`` (no descriptor to act on)."""
    def refuse(*args: Any) -> int:
        return errno
    return refuse


def _guarded(name: str, impl: Callable[..., int]) -> Callable[..., int]:
    """``impl(view, *args)`` with the gene's memory as it is now, every
    argument unsigned (pointers, lengths, descriptors); never raises."""
    def call(caller: wasmtime.Caller, *args: int) -> int:
        try:
            memory = caller.get(EXPORT_MEMORY)
            if not isinstance(memory, wasmtime.Memory):
                return EBADF
            size = int(memory.data_len(caller))
            view = CallView(size, base_address(memory, caller, size))
            return impl(view, *(as_u32(a) for a in args))
        except Exception:
            logger.exception("unexpected error in WASI %s", name)
            return EIO
    return call


def _put(view: CallView, ptr: int, fmt: str, *values: int) -> int:
    """Write ``values`` packed as ``fmt`` at ``ptr`` (EINVAL if it does not fit)."""
    data = struct.pack(fmt, *values)
    if not view.fits(ptr, len(data)):
        return EINVAL
    view.write(ptr, data)
    return SUCCESS


def _put_pair(view: CallView, first_ptr: int, first: int, second_ptr: int, second: int
              ) -> int:
    """Two u32 results at two pointers."""
    if not (view.fits(first_ptr, 4) and view.fits(second_ptr, 4)):
        return EINVAL
    view.write(first_ptr, struct.pack("<I", first))
    view.write(second_ptr, struct.pack("<I", second))
    return SUCCESS


def _put_strings(view: CallView, strings: list[bytes], ptrs: int, buf: int) -> int:
    """argv-style: pointers at ``ptrs``, NUL-terminated strings from ``buf``."""
    blob = b"".join(s + b"\x00" for s in strings)
    if not (view.fits(ptrs, 4 * len(strings)) and view.fits(buf, len(blob))):
        return EINVAL
    offset = buf
    for i, s in enumerate(strings):
        view.write(ptrs + 4 * i, struct.pack("<I", offset))
        offset += len(s) + 1
    view.write(buf, blob)
    return SUCCESS


def _iovecs(view: CallView, iovs: int, count: int) -> list[tuple[int, int]] | None:
    """The (ptr, len) pairs of an iovec list, each inside memory; None if not."""
    if count > 1024 or not view.fits(iovs, 8 * count):
        return None
    raw = view.read(iovs, 8 * count)
    vectors = [struct.unpack_from("<II", raw, 8 * i) for i in range(count)]
    if not all(view.fits(ptr, length) for ptr, length in vectors):
        return None
    return vectors
