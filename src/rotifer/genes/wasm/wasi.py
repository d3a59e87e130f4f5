"""The minimal WASI (preview 1) a gene gets: stdin, stdout, stderr and little else.

Modules from Rust ``wasm32-wasi`` and C with wasi-libc import
``wasi_snapshot_preview1``, and a WASI command gene (``_start``) talks to the
host only through it.  The functions are wasmtime's own, configured per run:

* **stdin** is the input JSON for a command gene, empty for an express gene;
* **stdout** is collected up to ``Limits.max_output_bytes`` for a command
  gene (its output); past that every write fails (``EFBIG``) and the run
  fails saying so.  For an express gene, stdout lines are its log;
* **stderr** lines are the gene's log, and its last ``STDERR_TAIL`` bytes go
  into the message when the run fails;
* **args** are just the gene's name; **no environment variables**; **no
  preopened directories**, so every path call fails (there is no file a
  gene can name); **no sockets** (preview 1 cannot create one, and none is
  handed over); clocks and ``random_get`` work;
* ``poll_oneoff`` (sleeping, waiting on clocks) is replaced by a function
  that returns ``ENOTSUP``: wasmtime's would block the host thread for as
  long as the gene asks, and neither fuel nor the epoch deadline can stop a
  thread that is not running guest code.

``proc_exit`` ends the run with the exit code (``wasmtime.ExitTrap``).
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from typing import Final

import wasmtime
from wasmtime import FuncType, ValType

from rotifer.genes.errors import GeneFailed

from .imports import WASI_MODULE

#: How much of the end of stderr a failure message quotes.
STDERR_TAIL: Final = 1024

#: WASI's errno for ENOTSUP (``__WASI_ERRNO_NOTSUP``).
WASI_ENOTSUP: Final = 58

Emit = Callable[[int, str], None]
"""``emit(level, line)``: a line for the gene's log."""


class OutputStream:
    """One of a gene's output streams: optionally kept (up to ``cap`` bytes),
    its lines passed on to the log, its tail remembered.

    Called by wasmtime for every write, from the thread running the gene; it
    must never raise (wasmtime-py prints and swallows such errors).
    """

    def __init__(self, *, keep: bool, cap: int, emit: Emit | None, tail: int = 0) -> None:
        self.keep = keep
        self.cap = cap
        self.emit = emit
        self.tail_cap = tail
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflowed = False
        self.tail = b""
        self._pending = b""

    def write(self, data: bytes) -> int:
        try:
            if self.keep:
                if self.overflowed or self.size + len(data) > self.cap:
                    self.overflowed = True
                    return -errno.EFBIG
                self.chunks.append(data)
                self.size += len(data)
            if self.tail_cap:
                self.tail = (self.tail + data)[-self.tail_cap:]
            if self.emit is not None:
                self._lines(data)
            return len(data)
        except Exception:  # pragma: no cover - nothing above raises
            return -errno.EIO

    def _lines(self, data: bytes) -> None:
        # At most one log line's worth is held back waiting for its newline.
        pending = (self._pending + data)[-64 * 1024:]
        *lines, self._pending = pending.split(b"\n")
        for line in lines:
            self.emit_line(line)

    def emit_line(self, line: bytes) -> None:
        if self.emit is not None and line.strip():
            self.emit(1, line.rstrip(b"\r").decode("utf-8", errors="replace"))

    def flush(self) -> None:
        """Pass on a last line without a newline."""
        if self._pending:
            self.emit_line(self._pending)
            self._pending = b""

    def data(self) -> bytes:
        return b"".join(self.chunks)

    def tail_text(self) -> str:
        """The end of the stream on one line (for an error message)."""
        text = self.tail.decode("utf-8", errors="replace").strip()
        return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def configure(store: wasmtime.Store, *, name: str, stdin: bytes, stdout: OutputStream,
              stderr: OutputStream) -> None:
    """Give ``store`` its WASI context: ``stdin`` as the input stream, the two
    output streams, ``argv = [name]`` and nothing else; GeneFailed if the
    stdin file cannot be made (a full or read-only temporary directory)."""
    try:
        _configure(store, name=name, stdin=stdin, stdout=stdout, stderr=stderr)
    except (OSError, wasmtime.WasmtimeError) as exc:
        raise GeneFailed(f"cannot give {name} its WASI input: {exc}") from None


def _configure(store: wasmtime.Store, *, name: str, stdin: bytes, stdout: OutputStream,
               stderr: OutputStream) -> None:
    config = wasmtime.WasiConfig()
    config.argv = [name]
    config.env = []
    if stdin:
        # wasmtime-py takes stdin from a file; it is opened here, so the file
        # can go at once.
        with tempfile.NamedTemporaryFile(prefix="rotifer-stdin-") as file:
            file.write(stdin)
            file.flush()
            config.stdin_file = file.name
    else:
        config.stdin_file = os.devnull
    config.stdout_custom = stdout.write
    config.stderr_custom = stderr.write
    store.set_wasi(config)


def _poll_oneoff(in_ptr: int, out_ptr: int, nsubscriptions: int, nevents_ptr: int) -> int:
    return WASI_ENOTSUP


def define(linker: wasmtime.Linker) -> None:
    """Link WASI preview 1 into ``linker`` (the store must be configured)."""
    linker.define_wasi()
    linker.allow_shadowing = True
    i32 = ValType.i32()
    linker.define_func(WASI_MODULE, "poll_oneoff", FuncType([i32, i32, i32, i32], [i32]),
                       _poll_oneoff)
    linker.allow_shadowing = False
