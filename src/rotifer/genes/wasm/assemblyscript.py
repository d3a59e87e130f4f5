"""AssemblyScript's ``env`` imports: ``abort``, ``trace`` and ``seed``.

Every module ``asc`` builds with default options imports ``env.abort``; it is
what a failed ``assert``, an out-of-bounds array access or a ``throw`` call.
Its arguments are pointers to AssemblyScript strings: UTF-16LE code units,
with the string's length *in bytes* in the u32 just before the pointer (the
runtime header's ``rtSize``).  Both the pointer and that length come from the
gene, so they are checked against the memory and the length is capped: a
lying header costs the host at most ``MAX_STRING_BYTES`` of reading.

``abort`` never raises into wasmtime (see host.py on why no host function
raises): it records what the gene said and returns; AssemblyScript follows
every ``abort`` call with ``unreachable``, so the gene traps at once, and
the runtime reports the recorded abort instead of the trap.  A hand-written
module that carries on after ``abort`` fails as soon as its call returns.
"""

from __future__ import annotations

import logging
import math
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import wasmtime

from .abi import EXPORT_MEMORY
from .guest import CallView, as_u32, base_address
from .imports import ENV_MODULE, abort_type, seed_type, trace_type

logger = logging.getLogger(__name__)

#: At most this many bytes of one string are decoded (1 024 UTF-16 code units).
MAX_STRING_BYTES: Final = 2048

#: C0 controls and DEL become spaces, so a message stays on one line.
_ONE_LINE: Final = {c: " " for c in [*range(0x20), 0x7F]}


def read_as_string(view: CallView, ptr: int, cap: int = MAX_STRING_BYTES) -> str | None:
    """The AssemblyScript string at ``ptr``, cut at ``cap`` bytes (marked ``…``);
    None for a null pointer or a string whose header or first bytes lie outside
    memory.  A length running past the end of memory is cut at the end."""
    if ptr == 0 or ptr < 4 or not view.fits(ptr - 4, 4):
        return None
    (length,) = struct.unpack("<I", view.read(ptr - 4, 4))
    whole = length & ~1  # an odd byte count is a lie too: its last byte is no code unit
    take = min(whole, cap, view.size - ptr) & ~1
    text = view.read(ptr, take).decode("utf-16-le", errors="replace")
    return text.translate(_ONE_LINE) + (" …" if take < whole else "")


@dataclass(frozen=True)
class Abort:
    """What a gene passed to ``abort``."""

    message: str | None
    file: str | None
    line: int
    column: int

    def describe(self) -> str:
        text = self.message if self.message else "(no message)"
        where = f"{self.file or '?'}:{self.line}:{self.column}"
        return f"aborted: {text} at {where}"


def _number(value: float) -> str:
    """A trace argument as AssemblyScript prints it (integers without ``.0``)."""
    if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


class EnvFunctions:
    """``env.abort``, ``env.trace`` and ``env.seed`` for one run.

    ``emit(level, text)`` passes a line on to the gene's log (the run's
    :class:`~rotifer.genes.wasm.host.HostFunctions` provides it).
    """

    def __init__(self, emit: Callable[[int, str], None]) -> None:
        self.emit = emit
        self.aborted: Abort | None = None

    def define(self, linker: wasmtime.Linker) -> None:
        linker.define_func(ENV_MODULE, "abort", abort_type(), self.abort, access_caller=True)
        linker.define_func(ENV_MODULE, "trace", trace_type(), self.trace, access_caller=True)
        linker.define_func(ENV_MODULE, "seed", seed_type(), self.seed)

    @staticmethod
    def _view(caller: wasmtime.Caller) -> CallView | None:
        memory = caller.get(EXPORT_MEMORY)
        if not isinstance(memory, wasmtime.Memory):
            return None
        size = int(memory.data_len(caller))
        return CallView(size, base_address(memory, caller, size))

    def abort(self, caller: wasmtime.Caller, message: int, file: int, line: int,
              column: int) -> None:
        try:
            if self.aborted is not None:
                return
            view = self._view(caller)
            text = where = None
            if view is not None:
                text = read_as_string(view, as_u32(message))
                where = read_as_string(view, as_u32(file))
            self.aborted = Abort(message=text, file=where, line=as_u32(line),
                                 column=as_u32(column))
        except Exception:
            logger.exception("unexpected error in env.abort")
            self.aborted = Abort(message=None, file=None, line=0, column=0)

    def trace(self, caller: wasmtime.Caller, message: int, n: int, a0: float, a1: float,
              a2: float, a3: float, a4: float) -> None:
        try:
            view = self._view(caller)
            text = read_as_string(view, as_u32(message)) if view is not None else None
            count = max(0, min(as_u32(n), 5))
            numbers = ", ".join(_number(v) for v in (a0, a1, a2, a3, a4)[:count])
            self.emit(1, "trace: " + (text or "") + (" " + numbers if numbers else ""))
        except Exception:
            logger.exception("unexpected error in env.trace")

    @staticmethod
    def seed() -> float:
        """A random seed for ``Math.random`` (never 0, which AssemblyScript rejects)."""
        return float(int.from_bytes(os.urandom(6), "little") | 1)
